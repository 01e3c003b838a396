#include "actors/scheduler_actor.hpp"

#include <algorithm>
#include <cstdint>
#include <chrono>

#include "actors/messages.hpp"
#include "actors/scheduler_actor_state.hpp"

namespace pagoda::actors {
namespace {

using Clock = SchedClock;
using Self = SchedSelf;
using Metrics = SchedulerMetrics;

EngineStats engine_stats(const SchedulerStats& s, Metrics& m, const SchedulerState& st) {
  m.peak_seqs = std::max(m.peak_seqs, s.running_seqs);
  m.peak_used = std::max(m.peak_used, s.used_blocks);
  EngineStats e;
  e.running = s.running_groups;
  e.waiting = s.waiting_groups;
  e.running_seqs = s.running_seqs;
  e.peak_running_seqs = m.peak_seqs;
  e.peak_kv_blocks_used = m.peak_used;
  e.preemptions = s.preemptions;
  e.urgent_prefill_steps = s.urgent_steps;
  e.tokens_generated = s.tokens_generated;
  e.spec = s.spec;
  e.steps = s.steps;
  e.kv_blocks_total = s.total_blocks;
  e.kv_blocks_used = s.used_blocks;
  e.kv_blocks_free = s.free_blocks;
  e.kv_blocks_cached = s.cached_blocks;
  e.draft_kv_blocks_total = m.draft_total;
  e.draft_kv_blocks_used = m.draft_used;
  e.prefix_queried_tokens = s.prefix.queried_tokens;
  e.prefix_hit_tokens = s.prefix.hit_tokens;
  e.prompt_tokens = m.prompt_tokens;
  e.generation_tokens = s.tokens_generated;
  e.ttft = m.latency.ttft();
  e.itl = m.latency.itl();
  e.queue = m.latency.queue();
  e.kv_utilisation = m.util_last;
  e.kv_utilisation_mean = m.util_samples ? m.util_sum / double(m.util_samples) : 0.0;
  e.kv_utilisation_samples = m.util_samples;
  e.timed_steps = m.timed_steps;
  e.step_wall_s = m.wall_s;
  e.step_compute_s = m.compute_s;
  e.step_host_s = m.host_s;
  e.steps_prepared_ahead = m.ahead_steps;
  e.step_prep_s = m.prep_s;
  e.step_ahead_prep_s = m.ahead_s;
  e.failed_steps = m.failed_steps;
  e.timed_out_steps = m.timed_out_steps;
  e.state = st.state;
  e.state_detail = st.state_detail;
  e.executor_restarts = m.executor_restarts;
  e.block_manager_restarts = m.block_manager_restarts;
  return e;
}

// After a step: one KV-utilisation sample when blocks are held.
void sample_utilisation(Metrics& m, const SchedulerCore& core) {
  if (core.stats().used_blocks == 0) return;
  m.util_last = core.kv_utilisation();
  m.util_sum += m.util_last;
  ++m.util_samples;
}

}  // namespace

void publish_stats(Self self) {
  auto& st = self->state;
  st.stats->set(engine_stats(st.core->stats(), st.metrics, st));
}

// Sends the core's events, one batch per request; forgets finished requests;
// publishes the statistics.
void dispatch(Self self) {
  auto& st = self->state;
  std::unordered_map<RequestId, EventBatch> batches;
  const Clock::time_point now = Clock::now();
  for (SeqEvent& e : st.core->take_events()) {
    st.metrics.latency.observe(e, now);
    batches[e.request].events.push_back(std::move(e));
  }
  publish_stats(self);
  for (auto& [id, batch] : batches) {
    auto it = st.requests.find(id);
    if (it == st.requests.end()) continue;
    const bool done = !batch.events.empty() && batch.events.back().group_done;
    self->send(it->second, events_atom::value, std::move(batch));
    if (done) {
      self->demonitor(it->second);
      st.by_addr.erase(it->second.address());
      st.requests.erase(it);
    }
  }
}

namespace {

void answer_stop(Self self) {
  auto& st = self->state;
  if (!st.stopping || st.core->in_flight() || st.core->has_outbox()) return;
  for (caf::response_promise& rp : st.stop_waiters) rp.deliver(true);
  st.stop_waiters.clear();
}

void send_plan(Self self, StepPlan plan) {
  auto& st = self->state;
  const uint64_t id = plan.step_id;
  if (!st.executor) return;  // lost meanwhile: the recovery ends this step
  self->send(st.executor, step_atom::value, std::move(plan));
  note_sent(self, id);
}

void on_booked(Self self, const BookingReply& reply) {
  auto& core = *self->state.core;
  StepPlan plan = core.commit(reply);
  // An empty plan stops the loop (until the next message) unless it came
  // from preemptions: then booking again may admit.
  const bool again = !plan.empty() || core.book_again() || core.has_outbox();
  if (!plan.empty()) {
    const Clock::time_point now = Clock::now();
    for (const GroupBooked& g : reply.admitted) self->state.metrics.latency.admitted(g.group, now);
    send_plan(self, std::move(plan));
  }
  dispatch(self);
  if (again) {
    maybe_step(self);
  } else {
    answer_stop(self);
  }
}

}  // namespace

// Books and sends steps while the core can prepare one (and the engine has
// actors to run them).
void maybe_step(Self self) {
  auto& st = self->state;
  if (!st.executor || !st.block_manager || !st.core->can_prepare()) return answer_stop(self);
  BookingRequest req = st.core->prepare();
  st.booking = true;
  const caf::actor_addr to = st.block_manager.address();
  self->request(st.block_manager, caf::infinite, book_atom::value, std::move(req))
      .await(
          [self](const BookingReply& reply) {
            self->state.booking = false;
            on_booked(self, reply);
            recover_if_lost(self);
          },
          [self, to](caf::error& err) {
            self->state.booking = false;
            // The block manager is gone (or replaced since): supervision
            // rebuilds the pool; an answer from a replaced one is stale.
            if (to == self->state.block_manager.address()) on_booking_error(self, err);
            recover_if_lost(self);
          });
}

namespace {

void on_result(Self self, const StepReply& r) {
  auto& st = self->state;
  auto& core = *st.core;
  if (self->current_sender() != st.executor.address()) return;  // an abandoned executor
  if (core.oldest_in_flight() != r.step_id) return;  // late: the step timed out
  st.metrics.draft_total = r.draft_blocks_total;
  st.metrics.draft_used = r.draft_blocks_used;
  if (r.skipped || (r.ok && r.result.skipped)) {
    core.skipped_step(r.step_id);
  } else if (!r.ok) {
    ++st.metrics.failed_steps;
    core.fail_step(r.step_id, r.error);
  } else if (auto ok = core.apply(r.result); !ok) {
    ++st.metrics.failed_steps;
    core.fail_step(r.step_id, ok.error().message);
  } else {
    sample_utilisation(st.metrics, core);
    Metrics& m = st.metrics;
    if (m.last_finished_ns > 0 && r.finished_ns > m.last_finished_ns) {
      const double wall = double(r.finished_ns - m.last_finished_ns) * 1e-9;
      const double compute = double(r.compute_ns) * 1e-9;
      ++m.timed_steps;
      m.wall_s += wall;
      m.compute_s += compute;
      m.host_s += std::max(0.0, wall - compute);
    }
    m.prep_s += double(r.prep_ns) * 1e-9;
    m.ahead_s += double(r.ahead_ns) * 1e-9;
    m.ahead_steps += r.ahead_ns > 0;
  }
  st.metrics.last_finished_ns = r.finished_ns;
  note_answered(self);
  dispatch(self);
  maybe_step(self);
}

// Ends a group the engine can no longer run (it failed) with an error.
void reject_group(Self self, caf::actor to, RequestId id, const std::string& message) {
  SeqEvent e;
  e.request = id;
  e.finish = FinishReason::error;
  e.error = message;
  EventBatch b;
  b.events.push_back(std::move(e));
  SeqEvent done;
  done.request = id;
  done.index = -1;
  done.group_done = true;
  b.events.push_back(std::move(done));
  self->send(to, events_atom::value, std::move(b));
  self->state.metrics.latency.forget(id);
}

// Spawns and monitors a request actor (it sends add_atom once tokenized).
void spawn_request(Self self, const SpawnRequest& r) {
  auto& st = self->state;
  caf::actor a = spawn_request_actor(self->system(), caf::actor_cast<caf::actor>(self), st.context,
                                     r.id, r.request, r.sink);
  self->monitor(a);
  st.by_addr[a.address()] = r.id;
  st.requests[r.id] = std::move(a);
  st.metrics.latency.submitted(r.id, Clock::now());
}

caf::behavior scheduler_fn(Self self, std::shared_ptr<SchedulerCore> core, caf::actor block_manager,
                           caf::actor executor, std::shared_ptr<StatsBox> stats,
                           std::shared_ptr<const RequestContext> context,
                           SchedulerActorConfig config) {
  self->state.context = std::move(context);
  self->state.core = std::move(core);
  self->state.stats = std::move(stats);
  self->state.block_manager = std::move(block_manager);
  self->state.executor = std::move(executor);
  self->state.config = std::move(config);
  publish_stats(self);
  watch_actors(self);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (on_actor_down(self, dm)) return;
    auto it = st.by_addr.find(dm.source);
    if (it == st.by_addr.end()) return;
    const RequestId id = it->second;
    st.by_addr.erase(it);
    st.requests.erase(id);
    st.metrics.latency.forget(id);
    st.core->cancel_group(id);
    dispatch(self);
    maybe_step(self);
  });
  return {
      [self](add_atom, const AddGroup& g) {
        auto& st = self->state;
        auto sender = caf::actor_cast<caf::actor>(self->current_sender());
        if (!sender) return;
        Result<void> ok = st.stopping ? Result<void>(make_error("the engine is stopping"))
                          : st.state == EngineState::failed
                              ? Result<void>(make_error("the engine failed: " + st.state_detail))
                              : st.core->add_group(g.id, g.prompt, g.options, g.constraint);
        if (!ok) return reject_group(self, sender, g.id, ok.error().message);
        st.metrics.prompt_tokens += g.prompt.size();
        maybe_step(self);
      },
      [self](spawn_atom, const SpawnRequest& r) { spawn_request(self, r); },
      [self](result_atom, const StepReply& r) { on_result(self, r); },
      [self](progress_atom, uint64_t step_id) {
        auto& st = self->state;
        if (self->current_sender() != st.executor.address()) return;  // an abandoned executor
        if (st.core->note_progress(step_id)) maybe_step(self);
      },
      [self](timeout_atom, uint64_t) { on_timeout(self); },
      [self](snapshot_atom) {
        if (self->state.block_manager) self->send(self->state.block_manager, snapshot_atom::value);
      },
      [self](abort_atom, RequestId id) {
        auto it = self->state.requests.find(id);
        if (it != self->state.requests.end()) {
          self->send<caf::message_priority::high>(it->second, cancel_atom::value);
        }
      },
      [self](cancel_atom, RequestId id) {
        self->state.core->cancel_group(id);
        dispatch(self);
        maybe_step(self);
      },
      [self](finish_atom, RequestId id, int32_t index) {
        self->state.core->finish_sequence(id, index, FinishReason::stop);
        dispatch(self);
        maybe_step(self);
      },
      [self](stop_atom) -> caf::result<bool> {
        auto& st = self->state;
        st.stopping = true;
        if (st.state != EngineState::failed) st.state = EngineState::stopping;
        st.core->cancel_all();
        dispatch(self);
        st.stop_waiters.push_back(self->make_response_promise());
        maybe_step(self);  // books the frees; answers once nothing is in flight
        return caf::delegated<bool>{};
      },
  };
}

}  // namespace

caf::actor spawn_scheduler_actor(caf::actor_system& sys, std::shared_ptr<SchedulerCore> core,
                                 caf::actor block_manager, caf::actor executor,
                                 std::shared_ptr<StatsBox> stats,
                                 std::shared_ptr<const RequestContext> context,
                                 SchedulerActorConfig config) {
  if (config.detached) {
    return sys.spawn<caf::detached>(scheduler_fn, std::move(core), std::move(block_manager),
                                    std::move(executor), std::move(stats), std::move(context), config);
  }
  return sys.spawn(scheduler_fn, std::move(core), std::move(block_manager), std::move(executor),
                   std::move(stats), std::move(context), config);
}

}  // namespace pagoda::actors
