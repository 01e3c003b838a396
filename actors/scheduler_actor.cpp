#include "actors/scheduler_actor.hpp"

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <map>
#include <unordered_map>

#include "actors/messages.hpp"

namespace pagoda::actors {
namespace {

using Clock = std::chrono::steady_clock;

// What the scheduler actor measures itself (see EngineStats).
struct Metrics {
  std::unordered_map<RequestId, Clock::time_point> awaiting_first;  // submitted, no token yet
  std::map<std::pair<RequestId, int32_t>, Clock::time_point> last_token;  // per sample
  uint64_t prompt_tokens = 0;
  LatencyHistogram ttft, itl;
  double util_last = 0.0, util_sum = 0.0;
  uint64_t util_samples = 0;
  int32_t peak_seqs = 0, peak_used = 0;
};

struct SchedulerState {
  std::shared_ptr<SchedulerCore> core;
  caf::actor executor;
  std::unordered_map<RequestId, caf::actor> requests;
  std::map<caf::actor_addr, RequestId> by_addr;
  std::shared_ptr<StatsBox> stats;
  std::shared_ptr<const RequestContext> context;
  Metrics metrics;
  bool stopping = false;
  std::vector<caf::response_promise> stop_waiters;  // answered when idle
};

using Self = caf::stateful_actor<SchedulerState>*;

EngineStats engine_stats(const SchedulerStats& s, Metrics& m) {
  m.peak_seqs = std::max(m.peak_seqs, s.running_seqs);
  m.peak_used = std::max(m.peak_used, s.used_blocks);
  EngineStats e;
  e.running = s.running_groups;
  e.waiting = s.waiting_groups;
  e.running_seqs = s.running_seqs;
  e.peak_running_seqs = m.peak_seqs;
  e.peak_kv_blocks_used = m.peak_used;
  e.preemptions = s.preemptions;
  e.tokens_generated = s.tokens_generated;
  e.steps = s.steps;
  e.kv_blocks_total = s.total_blocks;
  e.kv_blocks_used = s.used_blocks;
  e.kv_blocks_free = s.free_blocks;
  e.kv_blocks_cached = s.cached_blocks;
  e.prefix_queried_tokens = s.prefix.queried_tokens;
  e.prefix_hit_tokens = s.prefix.hit_tokens;
  e.prompt_tokens = m.prompt_tokens;
  e.generation_tokens = s.tokens_generated;
  e.ttft = m.ttft;
  e.itl = m.itl;
  e.kv_utilisation = m.util_last;
  e.kv_utilisation_mean = m.util_samples ? m.util_sum / double(m.util_samples) : 0.0;
  e.kv_utilisation_samples = m.util_samples;
  return e;
}

// TTFT / ITL from one event, observed now.
void measure(Metrics& m, const SeqEvent& e, Clock::time_point now) {
  if (e.has_token) {
    if (auto it = m.awaiting_first.find(e.request); it != m.awaiting_first.end()) {
      m.ttft.observe(std::chrono::duration<double>(now - it->second).count());
      m.awaiting_first.erase(it);
    }
    auto [it, fresh] = m.last_token.try_emplace({e.request, e.index}, now);
    if (!fresh) {
      m.itl.observe(std::chrono::duration<double>(now - it->second).count());
      it->second = now;
    }
  }
  if (e.group_done) {
    m.awaiting_first.erase(e.request);
    auto lo = m.last_token.lower_bound({e.request, INT32_MIN});
    auto hi = m.last_token.upper_bound({e.request, INT32_MAX});
    m.last_token.erase(lo, hi);
  }
}

// After a step: one KV-utilisation sample when blocks are held.
void sample_utilisation(Metrics& m, const SchedulerCore& core) {
  if (core.block_manager().num_used_blocks() == 0) return;
  m.util_last = core.kv_utilisation();
  m.util_sum += m.util_last;
  ++m.util_samples;
}

// Sends the core's events, one batch per request; forgets finished requests;
// publishes the statistics.
void dispatch(Self self) {
  auto& st = self->state;
  std::unordered_map<RequestId, EventBatch> batches;
  const Clock::time_point now = Clock::now();
  for (SeqEvent& e : st.core->take_events()) {
    measure(st.metrics, e, now);
    batches[e.request].events.push_back(std::move(e));
  }
  st.stats->set(engine_stats(st.core->stats(), st.metrics));
  if (st.stats->snapshot_due(now)) st.stats->publish_snapshot(st.core->kv_snapshot(), now);
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

void maybe_step(Self self) {
  auto& st = self->state;
  if (st.stopping && !st.core->in_flight()) {
    for (caf::response_promise& rp : st.stop_waiters) rp.deliver(true);
    st.stop_waiters.clear();
    return;
  }
  if (st.core->in_flight() || !st.core->has_unfinished()) return;
  StepPlan plan = st.core->schedule();
  dispatch(self);
  if (plan.empty()) return;
  self->request(st.executor, caf::infinite, step_atom::value, std::move(plan))
      .then(
          [self](const StepReply& reply) {
            auto& core = *self->state.core;
            if (!reply.ok) {
              core.fail_step(reply.error);
            } else if (auto ok = core.apply(reply.result); !ok) {
              core.fail_step(ok.error().message);
            } else {
              sample_utilisation(self->state.metrics, core);
            }
            dispatch(self);
            maybe_step(self);
          },
          [self](caf::error& err) {
            self->state.core->fail_step("executor: " + self->system().render(err));
            dispatch(self);
            maybe_step(self);
          });
}

// Spawns and monitors a request actor (it sends add_atom once tokenized).
void spawn_request(Self self, const SpawnRequest& r) {
  auto& st = self->state;
  caf::actor a = spawn_request_actor(self->system(), caf::actor_cast<caf::actor>(self), st.context,
                                     r.id, r.request, r.sink);
  self->monitor(a);
  st.by_addr[a.address()] = r.id;
  st.requests[r.id] = std::move(a);
  st.metrics.awaiting_first[r.id] = Clock::now();
}

caf::behavior scheduler_fn(Self self, std::shared_ptr<SchedulerCore> core, caf::actor executor,
                           std::shared_ptr<StatsBox> stats,
                           std::shared_ptr<const RequestContext> context) {
  self->state.context = std::move(context);
  self->state.core = std::move(core);
  self->state.stats = std::move(stats);
  self->state.stats->set(engine_stats(self->state.core->stats(), self->state.metrics));
  self->state.executor = std::move(executor);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto it = st.by_addr.find(dm.source);
    if (it == st.by_addr.end()) return;
    const RequestId id = it->second;
    st.by_addr.erase(it);
    st.requests.erase(id);
    st.metrics.awaiting_first.erase(id);
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
                                      : st.core->add_group(g.id, g.prompt, g.options);
        if (!ok) {
          SeqEvent e;
          e.request = g.id;
          e.finish = FinishReason::error;
          e.error = ok.error().message;
          EventBatch b;
          b.events.push_back(std::move(e));
          SeqEvent done;
          done.request = g.id;
          done.index = -1;
          done.group_done = true;
          b.events.push_back(std::move(done));
          self->send(sender, events_atom::value, std::move(b));
          st.metrics.awaiting_first.erase(g.id);
          return;
        }
        st.metrics.prompt_tokens += g.prompt.size();
        maybe_step(self);
      },
      [self](spawn_atom, const SpawnRequest& r) { spawn_request(self, r); },
      [self](snapshot_atom) {
        auto& st = self->state;
        const Clock::time_point now = Clock::now();
        if (st.stats->snapshot_due(now)) st.stats->publish_snapshot(st.core->kv_snapshot(), now);
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
        st.core->cancel_all();
        dispatch(self);
        if (!st.core->in_flight()) return true;
        st.stop_waiters.push_back(self->make_response_promise());
        return caf::delegated<bool>{};
      },
  };
}

}  // namespace

caf::actor spawn_scheduler_actor(caf::actor_system& sys, std::shared_ptr<SchedulerCore> core,
                                 caf::actor executor, std::shared_ptr<StatsBox> stats,
                                 std::shared_ptr<const RequestContext> context) {
  return sys.spawn(scheduler_fn, std::move(core), std::move(executor), std::move(stats),
                   std::move(context));
}

}  // namespace pagoda::actors
