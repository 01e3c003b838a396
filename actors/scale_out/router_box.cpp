#include "actors/scale_out/router_box.hpp"

namespace pagoda::actors {

void RouterBox::set_nodes(std::vector<NodeStatus> nodes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_ = std::move(nodes);
  }
  cv_.notify_all();
}

std::vector<NodeStatus> RouterBox::nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_;
}

void RouterBox::wait_tried(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] {
    if (nodes_.empty()) return false;
    for (const NodeStatus& n : nodes_) {
      if (!n.tried) return false;
    }
    return true;
  });
}

void RouterBox::set_context(std::shared_ptr<const RequestContext> ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  ctx_ = std::move(ctx);
}

std::shared_ptr<const RequestContext> RouterBox::context() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_;
}

std::vector<std::pair<std::string, KvSnapshot>> RouterBox::kv() {
  std::lock_guard<std::mutex> lock(mu_);
  kv_asked_ = std::chrono::steady_clock::now();
  return kv_;
}

bool RouterBox::kv_wanted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::chrono::steady_clock::now() - kv_asked_ < std::chrono::seconds(5);
}

void RouterBox::set_kv(size_t node, std::string name, KvSnapshot snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kv_.size() <= node) kv_.resize(node + 1);
  kv_[node] = {std::move(name), std::move(snapshot)};
}

void RouterBox::set_latency(const LatencyHistogram& ttft, const LatencyHistogram& itl) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_ = ttft;
  itl_ = itl;
}

std::pair<LatencyHistogram, LatencyHistogram> RouterBox::latency() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {ttft_, itl_};
}

}  // namespace pagoda::actors
