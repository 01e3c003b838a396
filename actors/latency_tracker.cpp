#include "actors/latency_tracker.hpp"

#include <climits>

namespace pagoda::actors {

void LatencyTracker::observe(const SeqEvent& e, Clock::time_point now) {
  if (e.has_token) {
    if (auto it = awaiting_first_.find(e.request); it != awaiting_first_.end()) {
      ttft_.observe(std::chrono::duration<double>(now - it->second).count());
      awaiting_first_.erase(it);
    }
    auto [it, fresh] = last_token_.try_emplace({e.request, e.index}, now);
    if (!fresh) {
      itl_.observe(std::chrono::duration<double>(now - it->second).count());
      it->second = now;
    }
  }
  if (e.group_done) forget(e.request);
}

void LatencyTracker::admitted(RequestId id, Clock::time_point now) {
  auto it = awaiting_admission_.find(id);
  if (it == awaiting_admission_.end()) return;
  queue_.observe(std::chrono::duration<double>(now - it->second).count());
  awaiting_admission_.erase(it);
}

void LatencyTracker::forget(RequestId id) {
  awaiting_first_.erase(id);
  awaiting_admission_.erase(id);
  auto lo = last_token_.lower_bound({id, INT32_MIN});
  auto hi = last_token_.upper_bound({id, INT32_MAX});
  last_token_.erase(lo, hi);
}

}  // namespace pagoda::actors
