// The scheduler actor's state and the functions its two translation units
// share (scheduler_actor.cpp: stepping and requests;
// scheduler_actor_supervision.cpp: the step watchdog and the replacement of
// lost actors). Internal to the scheduler actor: its thread only.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/latency_tracker.hpp"
#include "actors/scheduler_actor.hpp"

namespace pagoda::actors {

using SchedClock = std::chrono::steady_clock;

// What the scheduler actor measures itself (see EngineStats).
struct SchedulerMetrics {
  LatencyTracker latency;  // TTFT / ITL
  uint64_t prompt_tokens = 0;
  double util_last = 0.0, util_sum = 0.0;
  uint64_t util_samples = 0;
  int32_t peak_seqs = 0, peak_used = 0;
  int64_t last_finished_ns = 0;
  uint64_t timed_steps = 0, failed_steps = 0, timed_out_steps = 0;
  double wall_s = 0.0, compute_s = 0.0, host_s = 0.0;
  uint64_t ahead_steps = 0;         // steps the executor prepared while the one before ran
  double prep_s = 0.0, ahead_s = 0.0;
  uint64_t executor_restarts = 0, block_manager_restarts = 0;
  int32_t draft_total = 0, draft_used = 0;  // the executor's last StepReply
};

struct SchedulerState {
  std::shared_ptr<SchedulerCore> core;
  caf::actor block_manager, executor;
  SchedulerActorConfig config;
  std::unordered_map<RequestId, caf::actor> requests;
  std::map<caf::actor_addr, RequestId> by_addr;
  std::shared_ptr<StatsBox> stats;
  std::shared_ptr<const RequestContext> context;
  SchedulerMetrics metrics;
  EngineState state = EngineState::serving;
  std::string state_detail;
  bool stopping = false;
  std::vector<caf::response_promise> stop_waiters;  // answered when idle
  // The step watchdog: the steps sent, oldest first (answered ones are
  // dropped lazily), and when the oldest one still in flight started.
  std::deque<uint64_t> sent;
  uint64_t started_step = 0;
  SchedClock::time_point started_at;
  bool watchdog_armed = false;
  // A booking is outstanding (awaited): a loss seen meanwhile waits for it.
  bool booking = false;
  bool executor_lost = false, block_manager_lost = false;
  std::string lost_why;
};

using SchedSelf = caf::stateful_actor<SchedulerState>*;

// scheduler_actor.cpp
void dispatch(SchedSelf self);
void publish_stats(SchedSelf self);
void maybe_step(SchedSelf self);

// scheduler_actor_supervision.cpp
void watch_actors(SchedSelf self);                 // monitors both, publishes them
void note_sent(SchedSelf self, uint64_t step_id);  // a plan went to the executor
void note_answered(SchedSelf self);                // after a step left the core's in-flight list
void on_timeout(SchedSelf self);
// A down_msg from the executor or the block manager in service (false: not theirs).
bool on_actor_down(SchedSelf self, const caf::down_msg& dm);
// The block manager in service answered a booking with an error.
void on_booking_error(SchedSelf self, const caf::error& err);
// Recovers from the losses noted while a booking was outstanding.
void recover_if_lost(SchedSelf self);

}  // namespace pagoda::actors
