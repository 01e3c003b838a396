// /metrics: the engine's and the server's counters in the Prometheus text
// exposition format (version 0.0.4), names mirroring vLLM's with a
// `pagoda:` prefix, each sample labelled model_name="<id>":
//
//  gauges     pagoda:num_requests_running, pagoda:num_requests_waiting
//             (groups), pagoda:kv_cache_usage_perc (used / total blocks,
//             0..1), pagoda:kv_blocks_total / _used / _free / _cached
//             (total = used + free + cached; cached: unreferenced blocks
//             keeping a prefix for reuse, evicted on demand),
//             pagoda:connections
//  counters   pagoda:prefix_cache_queries_total, pagoda:prefix_cache_hits_total
//             (tokens), pagoda:num_preemptions_total, pagoda:urgent_prefill_steps_total,
//             pagoda:prompt_tokens_total, pagoda:generation_tokens_total,
//             pagoda:http_requests_total, pagoda:requests_rejected_total
//  histograms pagoda:time_to_first_token_seconds,
//             pagoda:inter_token_latency_seconds,
//             pagoda:request_queue_time_seconds (cumulative _bucket{le},
//             +Inf bucket == _count, _sum in seconds)
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/engine.hpp"

namespace pagoda::net {

struct ServerCounters {
  int32_t connections = 0;
  uint64_t http_requests = 0;
  uint64_t requests_rejected = 0;
};

// The content type of the text format.
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string metrics_text(const actors::EngineStats& stats, const ServerCounters& server, std::string_view model_name);

// Scale-out front end: per engine node (label node="HOST:PORT") whether it
// is in routing, its load and KV blocks, and what was routed there. Empty
// for no nodes.
std::string engine_node_metrics_text(const std::vector<actors::EngineNodeInfo>& nodes, std::string_view model_name);

}  // namespace pagoda::net
