// Prometheus text exposition of EngineStats (net/metrics_text.hpp).
#include "net/metrics_text.hpp"

#include <charconv>
#include <cmath>
#include <utility>

namespace pagoda::net {
namespace {

// A label value: backslash, double quote and newline escaped.
std::string label_value(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// Prometheus floats: shortest round-trip text, +Inf / -Inf / NaN spelled out.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, size_t(res.ptr - buf));
}

class Exposition {
 public:
  explicit Exposition(std::string_view model) : label_("model_name=\"" + label_value(model) + "\"") {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(std::string_view name, std::string_view extra_label, const std::string& value) {
    out_ += name;
    out_ += '{';
    out_ += label_;
    if (!extra_label.empty()) {
      out_ += ',';
      out_ += extra_label;
    }
    out_ += "} ";
    out_ += value;
    out_ += '\n';
  }
  void gauge(std::string_view name, std::string_view help, double v) {
    header(name, "gauge", help);
    sample(name, {}, number(v));
  }
  void counter(std::string_view name, std::string_view help, uint64_t v) {
    header(name, "counter", help);
    sample(name, {}, std::to_string(v));
  }
  void histogram(const std::string& name, std::string_view help, const actors::LatencyHistogram& h) {
    header(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.kBounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(name + "_bucket", "le=\"" + number(h.kBounds[i]) + "\"", std::to_string(cumulative));
    }
    cumulative += h.counts[h.kBounds.size()];
    // The +Inf bucket is the total by definition; the bucket counts and
    // `count` come from one snapshot, so they agree.
    sample(name + "_bucket", "le=\"+Inf\"", std::to_string(cumulative));
    sample(name + "_sum", {}, number(h.sum));
    sample(name + "_count", {}, std::to_string(cumulative));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string label_;
  std::string out_;
};

// Speculative decoding by proposer: drafted and accepted counters (their
// sum over `proposer` is the engine's total) and the acceptance rate (NaN
// until that proposer drafted).
void speculative_metrics(Exposition& e, const actors::SpecStats& s) {
  const std::pair<std::string, actors::SpecCounters> by[] = {{"proposer=\"ngram\"", s.ngram},
                                                             {"proposer=\"draft\"", s.draft}};
  const char* drafted = "pagoda:spec_decode_num_draft_tokens_total";
  e.header(drafted, "counter", "Speculative decoding: tokens drafted, by proposer.");
  for (const auto& [label, c] : by) e.sample(drafted, label, std::to_string(c.drafted));
  const char* accepted = "pagoda:spec_decode_num_accepted_tokens_total";
  e.header(accepted, "counter", "Speculative decoding: drafted tokens accepted by verification, by proposer.");
  for (const auto& [label, c] : by) e.sample(accepted, label, std::to_string(c.accepted));
  const char* rate = "pagoda:spec_decode_draft_acceptance_rate";
  e.header(rate, "gauge", "Speculative decoding: accepted / drafted tokens since the start, by proposer.");
  for (const auto& [label, c] : by) {
    e.sample(rate, label, number(c.drafted > 0 ? double(c.accepted) / double(c.drafted) : std::nan("")));
  }
}

}  // namespace

std::string engine_node_metrics_text(const std::vector<actors::EngineNodeInfo>& nodes, std::string_view model_name) {
  if (nodes.empty()) return {};
  Exposition e(model_name);
  auto each = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    e.header(name, type, help);
    for (const actors::EngineNodeInfo& n : nodes) {
      e.sample(name, "node=\"" + label_value(n.name) + "\"", number(double(value(n))));
    }
  };
  using N = const actors::EngineNodeInfo&;
  each("pagoda:engine_node_up", "gauge", "1 while the engine node is in routing.", [](N n) { return n.up; });
  each("pagoda:engine_node_requests_waiting", "gauge", "Sequence groups waiting on the node (its last report).",
       [](N n) { return n.waiting; });
  each("pagoda:engine_node_seqs_running", "gauge", "Sequences running on the node (its last report).",
       [](N n) { return n.running_seqs; });
  each("pagoda:engine_node_kv_blocks_total", "gauge", "KV-cache blocks of the node.",
       [](N n) { return n.kv_blocks_total; });
  each("pagoda:engine_node_kv_blocks_used", "gauge", "KV-cache blocks the node's sequences hold.",
       [](N n) { return n.kv_blocks_used; });
  each("pagoda:engine_node_prefix_cache_hits_total", "counter", "Prompt tokens the node found in its prefix cache.",
       [](N n) { return n.prefix_hit_tokens; });
  each("pagoda:engine_node_routed_total", "counter", "Requests this front end sent to the node (retries included).",
       [](N n) { return n.routed; });
  each("pagoda:engine_node_prefix_routed_total", "counter",
       "Requests sent to the node because it cached part of their prompt.", [](N n) { return n.prefix_routed; });
  return e.take();
}

std::string metrics_text(const actors::EngineStats& s, const ServerCounters& server, std::string_view model_name) {
  Exposition e(model_name);
  e.gauge("pagoda:num_requests_running", "Requests (sequence groups) running on the engine.", s.running);
  e.gauge("pagoda:num_requests_waiting", "Requests (sequence groups) waiting to be scheduled.", s.waiting);
  const double usage = s.kv_blocks_total > 0 ? double(s.kv_blocks_used) / double(s.kv_blocks_total) : 0.0;
  e.gauge("pagoda:kv_cache_usage_perc", "KV-cache usage as a fraction of the blocks (0..1).", usage);
  e.gauge("pagoda:kv_blocks_total", "KV-cache blocks in the pool.", s.kv_blocks_total);
  e.gauge("pagoda:kv_blocks_used", "KV-cache blocks held by sequences.", s.kv_blocks_used);
  e.gauge("pagoda:kv_blocks_free", "KV-cache blocks free and holding nothing reusable.", s.kv_blocks_free);
  e.gauge("pagoda:kv_blocks_cached", "KV-cache blocks held by no sequence but keeping a reusable prefix.",
          s.kv_blocks_cached);
  e.counter("pagoda:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            s.prefix_queried_tokens);
  e.counter("pagoda:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", s.prefix_hit_tokens);
  e.counter("pagoda:num_preemptions_total", "Sequence-group preemptions.", s.preemptions);
  e.counter("pagoda:urgent_prefill_steps_total",
            "Steps that ran only the prompts of clients with a single waiting request (fair, CPU).",
            s.urgent_prefill_steps);
  e.counter("pagoda:prompt_tokens_total", "Prompt tokens of accepted requests.", s.prompt_tokens);
  e.counter("pagoda:generation_tokens_total", "Tokens generated (all samples).", s.generation_tokens);
  speculative_metrics(e, s.spec);
  e.counter("pagoda:http_requests_total", "HTTP requests received.", server.http_requests);
  e.counter("pagoda:requests_rejected_total", "Requests rejected (limits, auth, validation).",
            server.requests_rejected);
  e.gauge("pagoda:connections", "Open client connections.", server.connections);
  e.histogram("pagoda:time_to_first_token_seconds", "Time to first token in seconds.", s.ttft);
  e.histogram("pagoda:inter_token_latency_seconds", "Time between consecutive tokens in seconds.", s.itl);
  e.histogram("pagoda:request_queue_time_seconds",
              "Time from a request's arrival at the scheduler to the plan of the step that first admits it, in seconds.",
              s.queue);
  return e.take();
}

}  // namespace pagoda::net
