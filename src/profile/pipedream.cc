#include "profile/pipedream.h"

#include "core/limits.h"
#include "profile/field_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <queue>
#include <sstream>

namespace hydrozoa::profile {
namespace {

using Node = PipeDreamNode;

std::vector<std::string> splitOn(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + sep.size();
  }
  return parts;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool parseDouble(const std::string& text, double* out) {
  const std::string t = trim(text);
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return !t.empty() && *end == '\0' && std::isfinite(*out);
}

// Sizes in bytes, as everywhere (core/limits.h); times as in profile JSON.
constexpr NumberRange kBytesRange{0, static_cast<double>(kMaxBytes), "bytes"};

// "<where>: forward_compute_time=abc is not a number; expected milliseconds from 0 to 1e+12"
Status checkNumber(const std::string& text, const NumberRange& range, double* out, const std::string& where,
                   const std::string& field) {
  const std::string shown = printable(text);
  if (!parseDouble(text, out)) {
    return parseError(fmt::format("{}: {}={} is not a number; expected {}", where, field, shown,
                                  describeNumberRange(range)));
  }
  if (!inNumberRange(*out, range)) {
    return parseError(fmt::format("{}: {}={} is out of range; expected {}", where, field, shown,
                                  describeNumberRange(range)));
  }
  return Status();
}

// "forward_compute_time=1.0, backward_compute_time=2.0, activation_size=[1; 2], parameter_size=3"
Status parseMetadata(const std::string& meta, Node* node, const std::string& where) {
  std::map<std::string, std::string> fields;
  for (const std::string& part : splitOn(meta, ", ")) {
    const auto eq = part.find('=');
    if (eq == std::string::npos) {
      return parseError(fmt::format("{}: \"{}\" is not key=value", where, printable(trim(part))));
    }
    fields[trim(part.substr(0, eq))] = part.substr(eq + 1);
  }
  struct Field {
    const char* key;
    double* into;
    const NumberRange& range;
  };
  for (const Field& f : {Field{"forward_compute_time", &node->forward_ms, kMillisecondsRange},
                         Field{"backward_compute_time", &node->backward_ms, kMillisecondsRange},
                         Field{"parameter_size", &node->parameter_bytes, kBytesRange}}) {
    auto it = fields.find(f.key);
    if (it == fields.end()) return parseError(fmt::format("{}: missing {}=", where, f.key));
    HZ_RETURN_IF_ERROR(checkNumber(trim(it->second), f.range, f.into, where, f.key));
  }
  auto it = fields.find("activation_size");
  if (it == fields.end()) return parseError(where + ": missing activation_size=");
  std::string act = trim(it->second);
  if (!act.empty() && act.front() == '[') {
    if (act.size() < 2 || act.back() != ']') {
      return parseError(fmt::format("{}: activation_size list \"{}\" has no closing ]", where, printable(act)));
    }
    node->activation_bytes = 0;
    for (const std::string& item : splitOn(act.substr(1, act.size() - 2), ";")) {
      double v = 0;
      HZ_RETURN_IF_ERROR(checkNumber(trim(item), kBytesRange, &v, where, "activation_size entry"));
      node->activation_bytes += v;
    }
    if (!inNumberRange(node->activation_bytes, kBytesRange)) {
      return parseError(fmt::format("{}: activation_size={} adds up to {} bytes; expected {}", where, printable(act),
                                    node->activation_bytes, describeNumberRange(kBytesRange)));
    }
  } else {
    HZ_RETURN_IF_ERROR(checkNumber(act, kBytesRange, &node->activation_bytes, where, "activation_size"));
  }
  return Status();
}

}  // namespace

bool looksLikePipeDreamGraph(const std::string& text) {
  const auto firstLineEnd = text.find('\n');
  const std::string first = text.substr(0, firstLineEnd);
  return first.find(" -- ") != std::string::npos;
}

Result<PipeDreamGraph> parsePipeDreamGraph(const std::string& text, const std::string& origin) {
  std::vector<Node> nodes;
  std::map<std::string, size_t> index;
  std::vector<std::pair<size_t, size_t>> edges;
  std::istringstream in(text);
  std::string line;
  size_t lineNo = 0;
  const std::string hint = "expected \"id -- description -- forward_compute_time=.., backward_compute_time=.., "
                           "activation_size=.., parameter_size=..\" or a tab and \"src -- dst\"";
  while (std::getline(in, line)) {
    ++lineNo;
    const std::string where = fmt::format("{}:{}", origin, lineNo);
    if (trim(line).empty()) continue;
    if (line[0] == '\t') {
      const auto parts = splitOn(trim(line), " -- ");
      if (parts.size() != 2) return parseError(fmt::format("{}: bad edge line; {}", where, hint));
      auto src = index.find(trim(parts[0])), dst = index.find(trim(parts[1]));
      if (src == index.end() || dst == index.end()) {
        return parseError(fmt::format("{}: edge names node \"{}\", which no node line defines before it", where,
                                      printable(trim(src == index.end() ? parts[0] : parts[1]))));
      }
      edges.emplace_back(src->second, dst->second);
      continue;
    }
    auto parts = splitOn(trim(line), " -- ");
    // The metadata is the part with forward_compute_time; the description is
    // whatever lies between the id and it; an optional stage_id follows.
    size_t metaAt = 0;
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i].rfind("forward_compute_time=", 0) == 0) metaAt = i;
    }
    if (parts.size() < 3 || metaAt < 2) return parseError(fmt::format("{}: bad node line; {}", where, hint));
    Node node;
    node.id = trim(parts[0]);
    node.line = lineNo;
    for (size_t i = 1; i < metaAt; ++i) node.description += (i > 1 ? " -- " : "") + parts[i];
    HZ_RETURN_IF_ERROR(parseMetadata(parts[metaAt], &node, where));
    if (index.count(node.id)) {
      return parseError(fmt::format("{}: node \"{}\" is defined twice", where, printable(node.id)));
    }
    if (static_cast<std::int64_t>(nodes.size()) >= kLayersRange.max) {
      return parseError(fmt::format("{}: more than {} nodes; expected {}", where, kLayersRange.max,
                                    describeRange(kLayersRange)));
    }
    index[node.id] = nodes.size();
    nodes.push_back(std::move(node));
  }
  if (nodes.empty()) return parseError(origin + ": no node lines; " + hint);

  // Topological order, stable in file order (Kahn with a min-heap on index).
  const size_t n = nodes.size();
  std::vector<std::vector<size_t>> succ(n);
  std::vector<int> indegree(n, 0);
  for (auto [s, d] : edges) {
    succ[s].push_back(d);
    ++indegree[d];
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t v = ready.top();
    ready.pop();
    order.push_back(v);
    for (size_t d : succ[v]) {
      if (--indegree[d] == 0) ready.push(d);
    }
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i) {
      if (indegree[i] > 0) {
        return parseError(fmt::format("{}:{}: node \"{}\" is on a cycle; graph.txt must be a DAG", origin,
                                      nodes[i].line, printable(nodes[i].id)));
      }
    }
  }
  PipeDreamGraph g;
  g.nodes = std::move(nodes);
  g.successors = std::move(succ);
  g.order = std::move(order);
  return g;
}

Result<Profile> importPipeDreamGraph(const std::string& text, const std::string& origin, std::int64_t batchSize) {
  if (!inRange(batchSize, kSamplesRange)) {
    return invalidArgument(fmt::format("{}: the graph.txt batch size {} is out of range; expected {}", origin,
                                       batchSize, describeRange(kSamplesRange)));
  }
  HZ_ASSIGN_OR_RETURN(const PipeDreamGraph graph, parsePipeDreamGraph(text, origin));
  const std::vector<Node>& nodes = graph.nodes;
  const std::vector<std::vector<size_t>>& succ = graph.successors;
  const std::vector<size_t>& order = graph.order;
  const size_t n = nodes.size();
  std::vector<int> hadInputs(n, 0);
  for (size_t v = 0; v < n; ++v) {
    for (size_t d : succ[v]) ++hadInputs[d];
  }
  // Graph inputs are the data batch, not layers: sources described as
  // "Input..." (PipeDream times data loading there) or that compute nothing
  // and hold no parameters. Their activations are stage 0's input.
  std::vector<size_t> chain;
  double inputBytes = 0;
  for (size_t v : order) {
    const Node& node = nodes[v];
    const bool idle = node.forward_ms == 0 && node.backward_ms == 0 && node.parameter_bytes == 0;
    const bool input = hadInputs[v] == 0 && (idle || trim(node.description).rfind("Input", 0) == 0);
    if (input) {
      inputBytes += node.activation_bytes;
      if (inputBytes > static_cast<double>(kMaxBytes)) {
        return parseError(fmt::format("{}:{}: the inputs' activation_size add up to {} bytes; expected at most {}",
                                      origin, node.line, inputBytes, kMaxBytes));
      }
    } else {
      chain.push_back(v);
    }
  }
  if (chain.empty()) return parseError(origin + ": every node is an input without compute; nothing to partition");

  // Bytes crossing a boundary after chain position u: activations of nodes at
  // or before u that are consumed after u (a difference array over positions).
  const size_t L = chain.size();
  std::vector<long> position(n, -1);
  for (size_t p = 0; p < L; ++p) position[chain[p]] = static_cast<long>(p);
  std::vector<double> delta(L + 1, 0.0);
  for (size_t p = 0; p < L; ++p) {
    const size_t v = chain[p];
    long last = static_cast<long>(p) + 1;  // its own output always crosses the very next boundary
    for (size_t d : succ[v]) last = std::max(last, position[d]);
    delta[p] += nodes[v].activation_bytes;
    delta[static_cast<size_t>(std::min<long>(last, static_cast<long>(L)))] -= nodes[v].activation_bytes;
  }

  Profile profile;
  profile.model = origin;
  profile.source = "pipedream";
  profile.device = "";  // PipeDream does not record it
  profile.optimizer = "sgd_momentum";
  Measurement m;
  m.microbatch_size = batchSize;
  m.input_bytes = static_cast<Bytes>(std::llround(inputBytes));
  double crossing = 0;
  for (size_t p = 0; p < L; ++p) {
    const Node& node = nodes[chain[p]];
    crossing += delta[p];
    if (crossing > static_cast<double>(kMaxBytes)) {
      return parseError(fmt::format("{}:{}: the boundary after node \"{}\" carries {} bytes of activations; expected "
                                    "at most {}",
                                    origin, node.line, printable(node.id), crossing, kMaxBytes));
    }
    const auto paramBytes = static_cast<Bytes>(std::llround(node.parameter_bytes));
    profile.layers.push_back({node.id + " " + trim(node.description), "pipedream", paramBytes, paramBytes});
    LayerCost cost;
    cost.forward_ms = node.forward_ms;
    cost.backward_ms = node.backward_ms;
    cost.output_bytes = static_cast<Bytes>(std::llround(std::max(0.0, crossing)));
    // PipeDream records no stash: count the node's activations, and at least
    // what crosses the boundary (conservative for skip connections).
    cost.stashed_bytes = std::max(static_cast<Bytes>(std::llround(node.activation_bytes)), cost.output_bytes);
    m.layers.push_back(cost);
  }
  profile.measurements.push_back(std::move(m));
  HZ_RETURN_IF_ERROR(validateProfile(profile, origin));
  return profile;
}

}  // namespace hydrozoa::profile
