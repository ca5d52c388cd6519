// YAML read into and written from the same nlohmann::json value as JSON
// (core/files.h: parseYaml, readYamlFile, toYaml).
#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/files.h"

namespace hydrozoa {

namespace {

Json scalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0' && errno == 0) return static_cast<std::int64_t>(i);
  const double d = std::strtod(s.c_str(), &end);
  if (*end == '\0' && std::isfinite(d)) return d;
  return s;
}

// yaml-cpp's nodes with their aliases resolved: an alias is the node it
// names, shared, so a node may contain itself (`x: &a [1, *a]`) or be
// reached 10^9 times (a billion laughs). The recursion is bounded by
// kMaxNesting and the values made by kMaxYamlValues.
struct YamlToJson {
  std::int64_t values = 0;
  std::string error;  // the first refusal; the result is then partial

  Json operator()(const YAML::Node& node, int depth) {
    if (!error.empty()) return nullptr;
    if (++values > kMaxYamlValues) {
      return refuse(node, fmt::format("its aliases expand to more than {} values (an alias of aliases of "
                                      "aliases?)",
                                      kMaxYamlValues));
    }
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined: return nullptr;
      case YAML::NodeType::Scalar: return scalarToJson(node);
      case YAML::NodeType::Sequence:
      case YAML::NodeType::Map: break;
    }
    if (depth >= kMaxNesting) {
      return refuse(node, fmt::format("lists and maps nested more than {} deep (an alias that contains itself?)",
                                      kMaxNesting));
    }
    if (node.IsSequence()) {
      Json arr = Json::array();
      for (const auto& child : node) arr.push_back((*this)(child, depth + 1));
      return arr;
    }
    Json obj = Json::object();
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return refuse(kv.first, "a key that is not a plain value");
      obj[kv.first.Scalar()] = (*this)(kv.second, depth + 1);
    }
    return obj;
  }

  Json refuse(const YAML::Node& node, const std::string& why) {
    if (error.empty()) {
      error = fmt::format("at line {}, column {}: {}", node.Mark().line + 1, node.Mark().column + 1, why);
    }
    return nullptr;
  }
};

void emit(YAML::Emitter& out, const Json& v) {
  switch (v.type()) {
    case Json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& item : v.items()) {
        out << YAML::Key << item.key() << YAML::Value;
        emit(out, item.value());
      }
      out << YAML::EndMap;
      break;
    case Json::value_t::array:
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& e : v) emit(out, e);
      out << YAML::EndSeq;
      break;
    case Json::value_t::string: {
      // Quote strings that would read back as another type ("32", "true").
      const std::string s = v.get<std::string>();
      const Json back = scalarToJson(YAML::Node(s));
      if (back.is_string()) {
        out << s;
      } else {
        out << YAML::DoubleQuoted << s;
      }
      break;
    }
    case Json::value_t::null: out << YAML::Null; break;
    case Json::value_t::boolean: out << v.get<bool>(); break;
    case Json::value_t::number_integer: out << v.get<std::int64_t>(); break;
    case Json::value_t::number_unsigned: out << v.get<std::uint64_t>(); break;
    default: {
      // The shortest decimal that reads back as the same double (yaml-cpp
      // writes 17 digits: 0.59 as 0.58999999999999997).
      const double d = v.get<double>();
      if (std::isfinite(d)) {
        out << fmt::format("{}", d);
      } else {
        out << d;
      }
      break;
    }
  }
}

}  // namespace

std::string toYaml(const Json& value) {
  YAML::Emitter out;
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

namespace {

// The byte offset of the first byte that is not valid UTF-8, or npos.
size_t invalidUtf8At(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    }
    i += n;
  }
  return std::string::npos;
}

}  // namespace

Result<Json> parseYaml(const std::string& text, const std::string& origin) {
  // Checked once here, so every string from a YAML file can be dumped and printed.
  if (const size_t bad = invalidUtf8At(text); bad != std::string::npos) {
    return parseError(fmt::format("{}: not valid UTF-8 text at byte {}; is it a YAML file?", origin, bad));
  }
  try {
    YamlToJson convert;
    Json value = convert(YAML::Load(text), 0);
    if (!convert.error.empty()) return parseError(fmt::format("{}: refused {}", origin, convert.error));
    return value;
  } catch (const YAML::DeepRecursion& e) {
    return parseError(fmt::format("{}: lists and maps nested more than {} deep at line {}, column {}", origin,
                                  e.depth(), e.mark.line + 1, e.mark.column + 1));
  } catch (const YAML::Exception& e) {
    // yaml-cpp quotes the offending character, which may be a newline.
    std::string msg = e.msg;
    for (char& c : msg) {
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    }
    return parseError(fmt::format("{}: not valid YAML at line {}, column {}: {}", origin, e.mark.line + 1,
                                  e.mark.column + 1, msg));
  }
}

Result<Json> readYamlFile(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return parseYaml(text, path);
}

}  // namespace hydrozoa
