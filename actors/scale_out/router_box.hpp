// RouterBox and the router's plain settings: what the router actor
// (actors/scale_out/engine_router.hpp) publishes for the RemoteEngine and the front
// end's threads (node status, the KV map, the tokenizer context, the front
// end's latency histograms), and how it
// is configured. Thread-safe (one mutex); values otherwise.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actors/scale_out/remote_protocol.hpp"
#include "actors/request_actor.hpp"
#include "actors/scale_out/route_policy.hpp"

namespace pagoda::actors {

struct RouterConfig {
  RouteWeights weights;
  double connect_timeout_s = 5.0;
  double reconnect_interval_s = 1.0;
  int32_t report_interval_ms = 200;
  double report_timeout_s = 2.0;
  int32_t missed_reports_down = 3;
  int32_t max_retries = 2;
};

struct NodeAddress {
  std::string host;
  uint16_t port = 0;
  std::string name() const { return host + ":" + std::to_string(port); }
};

// One node as the front end reports it (/metrics, logs, tests).
struct NodeStatus {
  std::string name;
  bool up = false;
  bool tried = false;         // at least one connect attempt finished
  std::string error;          // why it is down (last failure)
  NodeHello hello;            // valid once it was up
  NodeReport report;          // the latest report
  uint64_t routed = 0;        // requests sent there (retries included)
  uint64_t prefix_routed = 0; // of which chosen with a cached prefix
};

// What the router publishes and the RemoteEngine reads, any thread.
class RouterBox {
 public:
  void set_nodes(std::vector<NodeStatus> nodes);
  std::vector<NodeStatus> nodes() const;
  // Blocks until every node has been tried once or `timeout` passed.
  void wait_tried(std::chrono::milliseconds timeout) const;
  void set_context(std::shared_ptr<const RequestContext> ctx);
  std::shared_ptr<const RequestContext> context() const;
  // The KV map: a reader's kv() marks interest; while someone asked within
  // the last 5 s the router polls each up node's pool (kv_wanted) and
  // stores it with set_kv (owners named by the front end's request ids).
  std::vector<std::pair<std::string, KvSnapshot>> kv();
  bool kv_wanted() const;
  void set_kv(size_t node, std::string name, KvSnapshot snapshot);
  // The front end's TTFT / ITL histograms (measured by the router).
  void set_latency(const LatencyHistogram& ttft, const LatencyHistogram& itl);
  std::pair<LatencyHistogram, LatencyHistogram> latency() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<NodeStatus> nodes_;
  std::shared_ptr<const RequestContext> ctx_;
  std::vector<std::pair<std::string, KvSnapshot>> kv_;  // per node; empty pool: none
  std::chrono::steady_clock::time_point kv_asked_{};
  LatencyHistogram ttft_, itl_;
};

}  // namespace pagoda::actors
