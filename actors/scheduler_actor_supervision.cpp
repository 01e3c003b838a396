// The scheduler actor's supervision (see scheduler_actor.hpp): the step
// watchdog, and the replacement of a lost executor or block manager.
#include <algorithm>
#include <chrono>
#include <string>

#include "actors/messages.hpp"
#include "actors/scheduler_actor_state.hpp"

namespace pagoda::actors {
namespace {

SchedClock::duration step_timeout(const SchedulerState& st) {
  return std::chrono::duration_cast<SchedClock::duration>(
      std::chrono::duration<double>(st.config.step_timeout_s));
}

// Drops the steps no longer in flight; the oldest one left started now if it
// just became the oldest (the executor runs steps in order: it starts a step
// when it has answered the one before).
void forget_answered(SchedulerState& st) {
  const uint64_t oldest = st.core->oldest_in_flight();
  while (!st.sent.empty() && (oldest == 0 || st.sent.front() < oldest)) st.sent.pop_front();
  if (!st.sent.empty() && st.sent.front() != st.started_step) {
    st.started_step = st.sent.front();
    st.started_at = SchedClock::now();
  }
}

// One delayed message for the oldest step, not one per step: a timer costs
// CAF's clock thread a wake-up, which on a small machine takes a core from
// the compute threads (see worker_policy.hpp).
void arm_watchdog(SchedSelf self) {
  auto& st = self->state;
  if (st.watchdog_armed || st.sent.empty()) return;
  const auto deadline = st.started_at + step_timeout(st);
  const auto wait = std::max(SchedClock::duration::zero(), deadline - SchedClock::now());
  self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(wait) +
                               std::chrono::milliseconds(1),
                     timeout_atom::value, uint64_t(0));
  st.watchdog_armed = true;
}

void publish_actors(SchedSelf self) {
  auto& st = self->state;
  std::lock_guard<std::mutex> lock(st.config.actors->mu);
  st.config.actors->executor = st.executor;
  st.config.actors->block_manager = st.block_manager;
}

// A hung executor is told to exit (it does once its step returns) and
// counted as abandoned until then; its answers are ignored (on_result).
void abandon_executor(SchedSelf self) {
  auto& st = self->state;
  if (!st.executor) return;
  self->demonitor(st.executor);
  auto actors = st.config.actors;
  ++actors->abandoned;
  st.executor->attach_functor([actors] { --actors->abandoned; });
  caf::anon_send_exit(st.executor, caf::exit_reason::kill);
  st.executor = nullptr;
}

Result<caf::actor> replace(SchedSelf self, caf::actor& old,
                           const std::function<Result<caf::actor>(caf::actor_system&)>& make) {
  if (old) self->demonitor(old);
  old = nullptr;
  if (!make) return make_error("no replacement is configured");
  auto fresh = make(self->system());
  if (!fresh) return fresh.error();
  self->monitor(*fresh);
  old = *fresh;
  return fresh;
}

// Every group ends with an error: the engine cannot run them any more.
void fail_engine(SchedSelf self, const std::string& why) {
  auto& st = self->state;
  st.state = EngineState::failed;
  st.state_detail = why;
  for (const auto& [id, actor] : st.requests) st.core->fail_group(id, "the engine failed: " + why);
  st.core->reset_actors(why);  // drops the frees: there is no pool to book them with
}

// The recovery itself (no booking outstanding): fail what was in flight,
// preempt the rest, replace the lost actor(s) and reset the survivor.
void recover(SchedSelf self) {
  auto& st = self->state;
  const std::string why = st.lost_why;
  const bool executor_lost = st.executor_lost, manager_lost = st.block_manager_lost;
  st.executor_lost = st.block_manager_lost = false;
  st.state = EngineState::recovering;
  st.state_detail = why;
  if (executor_lost) ++st.metrics.executor_restarts;  // counted (published) from the start
  if (manager_lost) ++st.metrics.block_manager_restarts;
  st.core->reset_actors("engine: " + why + "; the request was ended");
  st.sent.clear();
  st.started_step = 0;
  st.metrics.last_finished_ns = 0;
  dispatch(self);  // the in-flight groups end now, before a model reload
  std::string failure;
  if (executor_lost) {
    if (auto ok = replace(self, st.executor, st.config.make_executor); !ok) {
      failure = "the executor could not be replaced: " + ok.error().message;
    }
  } else if (st.executor) {
    self->send(st.executor, reset_atom::value);
  }
  if (manager_lost) {
    if (auto ok = replace(self, st.block_manager, st.config.make_block_manager); !ok && failure.empty()) {
      failure = "the block manager could not be replaced: " + ok.error().message;
    }
  } else if (st.block_manager) {
    self->send(st.block_manager, reset_atom::value);
  }
  publish_actors(self);
  if (!failure.empty()) {
    fail_engine(self, failure);
  } else {
    st.state = st.stopping ? EngineState::stopping : EngineState::serving;
  }
  dispatch(self);
  maybe_step(self);
}

void note_loss(SchedSelf self, bool executor, const std::string& why) {
  auto& st = self->state;
  if (st.state == EngineState::failed) return;
  (executor ? st.executor_lost : st.block_manager_lost) = true;
  st.lost_why = st.lost_why.empty() || st.lost_why == why ? why : st.lost_why + "; " + why;
  if (!st.booking) recover_if_lost(self);
}

}  // namespace

void watch_actors(SchedSelf self) {
  auto& st = self->state;
  if (st.executor) self->monitor(st.executor);
  if (st.block_manager) self->monitor(st.block_manager);
  publish_actors(self);
}

void note_sent(SchedSelf self, uint64_t step_id) {
  auto& st = self->state;
  if (st.config.step_timeout_s <= 0) return;
  st.sent.push_back(step_id);
  forget_answered(st);
  arm_watchdog(self);
}

void note_answered(SchedSelf self) {
  auto& st = self->state;
  if (st.config.step_timeout_s > 0) forget_answered(st);
}

// The watchdog fired: if the oldest step in flight ran past the timeout, the
// executor counts as hung (it is replaced); else it re-arms.
void on_timeout(SchedSelf self) {
  auto& st = self->state;
  st.watchdog_armed = false;
  forget_answered(st);
  if (st.sent.empty()) return;
  if (SchedClock::now() >= st.started_at + step_timeout(st) &&
      st.core->oldest_in_flight() == st.started_step) {
    ++st.metrics.timed_out_steps;
    const std::string why = "executor: step " + std::to_string(st.started_step) +
                            " did not finish within " + std::to_string(st.config.step_timeout_s) + " s";
    abandon_executor(self);
    note_loss(self, /*executor=*/true, why);
    return;
  }
  arm_watchdog(self);
}

bool on_actor_down(SchedSelf self, const caf::down_msg& dm) {
  auto& st = self->state;
  const bool executor = st.executor && dm.source == st.executor.address();
  const bool manager = st.block_manager && dm.source == st.block_manager.address();
  if (!executor && !manager) return false;
  const std::string why = std::string(executor ? "the executor" : "the block manager") +
                          " stopped (" + caf::to_string(dm.reason) + ")";
  if (executor) st.executor = nullptr;
  if (manager) st.block_manager = nullptr;
  note_loss(self, executor, why);
  return true;
}

void on_booking_error(SchedSelf self, const caf::error& err) {
  auto& st = self->state;
  if (st.block_manager) self->demonitor(st.block_manager);
  st.block_manager = nullptr;
  note_loss(self, /*executor=*/false, "the block manager failed a booking (" + caf::to_string(err) + ")");
}

void recover_if_lost(SchedSelf self) {
  auto& st = self->state;
  if (st.booking || (!st.executor_lost && !st.block_manager_lost)) return;
  recover(self);
  st.lost_why.clear();
}

}  // namespace pagoda::actors
