// LatencyTracker: TTFT and ITL of requests, from the SeqEvents that reach an
// actor. TTFT = from submitted() to the first event with a token (any
// sample); ITL = between consecutive tokens of one sample (n samples: n
// streams); queue time = from submitted() to admitted() (the scheduler
// actor calls it when it sends the plan of the step that first admits the
// request; a readmission after a preemption is not counted again). Used
// where latency is measured: the scheduler actor (one engine) and the
// scale-out router (the front end's view, which includes the hop to the
// node; it never calls admitted()). Plain value type; owned and used by one actor.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>

#include "actors/engine_types.hpp"
#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

class LatencyTracker {
 public:
  using Clock = std::chrono::steady_clock;

  void submitted(RequestId id, Clock::time_point t) {
    awaiting_first_[id] = t;
    awaiting_admission_[id] = t;
  }
  // The request's first step plan was sent at `now` (later calls: no-op).
  void admitted(RequestId id, Clock::time_point now);
  // Observes one event at `now`; a group_done event forgets the request.
  void observe(const SeqEvent& e, Clock::time_point now);
  // The request ended without a group_done event (cancelled, refused, lost).
  void forget(RequestId id);

  const LatencyHistogram& ttft() const { return ttft_; }
  const LatencyHistogram& itl() const { return itl_; }
  const LatencyHistogram& queue() const { return queue_; }

 private:
  std::unordered_map<RequestId, Clock::time_point> awaiting_first_;  // submitted, no token yet
  std::unordered_map<RequestId, Clock::time_point> awaiting_admission_;  // submitted, never admitted
  std::map<std::pair<RequestId, int32_t>, Clock::time_point> last_token_;  // per sample
  LatencyHistogram ttft_, itl_, queue_;
};

}  // namespace pagoda::actors
