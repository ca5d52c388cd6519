#include "cluster/stragglers.h"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <sstream>

namespace hydrozoa::cluster {
namespace {

const std::set<std::string> kModes = {"auto", "quota", "pause", "sleep"};

// "3x", "3", "200%" (a delay: 3x).
Result<double> parseSlowdown(const std::string& text, const std::string& what) {
  std::string t = text;
  const bool percent = !t.empty() && t.back() == '%';
  if (!t.empty() && (t.back() == 'x' || t.back() == '%')) t.pop_back();
  char* end = nullptr;
  const double v = t.empty() ? NAN : std::strtod(t.c_str(), &end);
  if (t.empty() || !end || *end != '\0' || !std::isfinite(v)) {
    return invalidArgument(fmt::format("{}: \"{}\" is not a slowdown; write a factor (3x) or a delay (200%)", what,
                                       text));
  }
  return percent ? 1 + v / 100 : v;
}

Status setField(StragglerSpec* s, const std::string& key, const std::string& value, const std::string& what) {
  const std::string where = what + ": " + key;
  if (key == "worker") {
    HZ_ASSIGN_OR_RETURN(std::int64_t w, parseCount(value, where, {0, kWorkersRange.max - 1}));
    s->worker = static_cast<int>(w);
  } else if (key == "slowdown") {
    HZ_ASSIGN_OR_RETURN(s->slowdown, parseSlowdown(value, where));
  } else if (key == "mode") {
    s->mode = value;
  } else if (key == "pause") {
    HZ_ASSIGN_OR_RETURN(s->pause, parseSeconds(value, where));
  } else if (key == "every") {
    HZ_ASSIGN_OR_RETURN(s->every, parseSeconds(value, where));
  } else if (key == "start") {
    HZ_ASSIGN_OR_RETURN(s->start, parseSeconds(value, where));
  } else if (key == "for" || key == "duration") {
    HZ_ASSIGN_OR_RETURN(s->duration, parseSeconds(value, where));
  } else {
    return invalidArgument(fmt::format("{}: unknown key \"{}\" (known: worker, slowdown, mode, pause, every, start, "
                                       "for)",
                                       what, key));
  }
  return Status();
}

Status checkOne(const StragglerSpec& s, const std::string& what) {
  auto bad = [&](const std::string& m) { return invalidArgument(fmt::format("{}: {}", what, m)); };
  if (!kModes.count(s.mode)) return bad(fmt::format("mode \"{}\" is not auto, quota, pause or sleep", s.mode));
  const bool slow = s.slowdown != 1, pauses = s.pause > 0 || s.every > 0;
  if (slow && pauses) return bad("give either a slowdown or random pauses (pause, every), not both");
  if (!slow && !pauses) return bad("says nothing to do: give slowdown=3x, or pause=200ms,every=2s");
  if (slow && !(s.slowdown > 1 && s.slowdown <= 100)) {
    return bad(fmt::format("slowdown {} must be more than 1x and at most 100x", s.slowdown));
  }
  if (pauses) {
    if (!(s.pause > 0) || !(s.every > 0)) return bad("random pauses need both pause (how long) and every (how often)");
    if (s.pause > 3600 || s.every > 86400) return bad("pause must be at most 1h and every at most 24h");
    if (s.mode != "auto" && s.mode != "pause") return bad("random pauses are SIGSTOP bursts: mode pause (or auto)");
  }
  if (s.start < 0 || s.duration < 0) return bad("start and for must not be negative");
  return Status();
}

}  // namespace

Result<std::vector<StragglerSpec>> parseStragglers(const std::string& text, const std::string& what) {
  std::vector<StragglerSpec> out;
  std::istringstream specs(text);
  for (std::string one; std::getline(specs, one, ';');) {
    if (one.find_first_not_of(" \t") == std::string::npos) continue;
    StragglerSpec s;
    bool named = false;
    std::istringstream fields(one);
    for (std::string field; std::getline(fields, field, ',');) {
      field.erase(0, field.find_first_not_of(" \t"));
      field.erase(field.find_last_not_of(" \t") + 1);
      const auto eq = field.find('=');
      if (eq == std::string::npos) {
        return invalidArgument(fmt::format("{}: \"{}\" is not key=value (e.g. worker=1,slowdown=3x)", what, field));
      }
      const std::string key = field.substr(0, eq);
      HZ_RETURN_IF_ERROR(setField(&s, key, field.substr(eq + 1), what));
      named = named || key == "worker";
    }
    if (!named) return invalidArgument(fmt::format("{}: \"{}\" names no worker (worker=N)", what, one));
    HZ_RETURN_IF_ERROR(checkOne(s, fmt::format("{}: \"{}\"", what, one)));
    out.push_back(s);
  }
  if (out.empty()) return invalidArgument(fmt::format("{}: no straggler given (e.g. worker=1,slowdown=3x)", what));
  return out;
}

Result<std::vector<StragglerSpec>> readStragglers(const Json& j, const std::string& where) {
  if (j.is_string()) return parseStragglers(j.get<std::string>(), where);
  if (!j.is_array()) return invalidArgument(fmt::format("{}: expected a list of stragglers", where));
  std::vector<StragglerSpec> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    if (j[i].is_string()) {
      HZ_ASSIGN_OR_RETURN(auto some, parseStragglers(j[i].get<std::string>(), at));
      out.insert(out.end(), some.begin(), some.end());
      continue;
    }
    ObjectReader r(j[i], at);
    StragglerSpec s;
    s.worker = static_cast<int>(r.count("worker", {0, kWorkersRange.max - 1}));
    if (const Json* v = r.raw("slowdown")) {
      auto f = parseSlowdown(v->is_string() ? v->get<std::string>() : v->dump(), r.child("slowdown"));
      if (f.ok()) {
        s.slowdown = *f;
      } else {
        r.adopt(f.status());
      }
    }
    s.mode = r.optString("mode").value_or(s.mode);
    if (r.has("pause")) s.pause = r.seconds("pause");
    if (r.has("every")) s.every = r.seconds("every");
    if (r.has("start")) s.start = r.seconds("start");
    if (r.has("for")) s.duration = r.seconds("for");
    r.rejectUnknownKeys();
    HZ_RETURN_IF_ERROR(r.status());
    HZ_RETURN_IF_ERROR(checkOne(s, at));
    out.push_back(s);
  }
  return out;
}

std::string formatStraggler(const StragglerSpec& s) {
  std::string out = fmt::format("worker={}", s.worker);
  if (s.slowdown != 1) out += fmt::format(",slowdown={}x", s.slowdown);
  if (s.pause > 0) out += ",pause=" + fmt::format("{}s", s.pause) + ",every=" + fmt::format("{}s", s.every);
  if (s.mode != "auto") out += ",mode=" + s.mode;
  if (s.start > 0) out += fmt::format(",start={}s", s.start);
  if (s.duration > 0) out += fmt::format(",for={}s", s.duration);
  return out;
}

Status validateStragglers(const std::vector<StragglerSpec>& all, int workers, const std::string& what) {
  std::set<int> seen;
  for (const StragglerSpec& s : all) {
    HZ_RETURN_IF_ERROR(checkOne(s, what));
    if (s.worker >= workers) {
      return invalidArgument(fmt::format("{}: worker {} does not exist: the job's workers are 0 to {}", what, s.worker,
                                         workers - 1));
    }
    if (!seen.insert(s.worker).second) {
      return invalidArgument(fmt::format("{}: worker {} is named twice; give each worker one straggler pattern", what,
                                         s.worker));
    }
  }
  return Status();
}

Result<FlexrrSpec> readFlexrr(const Json& j, const std::string& where) {
  FlexrrSpec f;
  if (j.is_boolean()) {
    f.enabled = j.get<bool>();
    return f;
  }
  ObjectReader r(j, where);
  f.enabled = r.has("enabled") ? r.boolean("enabled") : true;
  f.helper_group = static_cast<int>(r.optCount("helper_group", {1, 64}).value_or(f.helper_group));
  if (r.has("report_at")) f.report_at = r.fraction("report_at");
  if (r.has("threshold")) f.threshold = r.fraction("threshold");
  if (r.has("initial")) f.initial = r.fraction("initial");
  if (r.has("follow_up")) f.follow_up = r.fraction("follow_up");
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  HZ_RETURN_IF_ERROR(validateFlexrr(f, where));
  return f;
}

Json flexrrToJson(const FlexrrSpec& f) {
  return {{"enabled", f.enabled},     {"helper_group", f.helper_group}, {"report_at", f.report_at},
          {"threshold", f.threshold}, {"initial", f.initial},           {"follow_up", f.follow_up}};
}

Status validateFlexrr(const FlexrrSpec& f, const std::string& what) {
  auto in = [](double v, double lo, double hi) { return v >= lo && v <= hi; };
  if (f.helper_group < 1 || f.helper_group > 64) return invalidArgument(what + ": helper_group must be 1 to 64");
  if (!in(f.report_at, 0.01, 1)) return invalidArgument(what + ": report_at must be a fraction from 1% to 100%");
  if (!in(f.threshold, 0, 1)) return invalidArgument(what + ": threshold must be a fraction from 0 to 100%");
  if (!in(f.initial, 0, 1) || !in(f.follow_up, 0, 1)) {
    return invalidArgument(what + ": initial and follow_up must be fractions from 0 to 100% (each offer is at least "
                                  "one microbatch)");
  }
  return Status();
}

}  // namespace hydrozoa::cluster
