#include "actors/executor_actor.hpp"

#include <chrono>
#include <deque>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>

#include "actors/messages.hpp"
#include "actors/steady_ns.hpp"

namespace pagoda::actors {
namespace {

// From the executor's step thread to its actor (anonymous: no sender).
using issued_atom = caf::atom_constant<caf::atom("issued")>;
using ran_atom = caf::atom_constant<caf::atom("ran")>;

// A plan the actor holds: received, then prepared, then launched.
struct Held {
  uint64_t step_id = 0;
  StepFault fault;
  caf::actor_addr reply_to;  // its sender (weak: no cycle)
  int64_t received_ns = 0;   // when its launch began (the step's start)
  int64_t idle_ns = 0;       // since the step before finished
};

struct ExecutorState {
  std::shared_ptr<Executor> executor;
  std::function<StepFault(uint64_t)> fault;
  uint64_t plans = 0;
  int64_t last_finished_ns = 0;
  caf::actor_addr reply_to;  // the sender of the plan being run (progress goes there)
  std::deque<std::pair<StepPlan, Held>> waiting;  // received, not prepared
  std::optional<Held> prepared, launched;         // the executor's prepared and launched steps
};

using Self = caf::stateful_actor<ExecutorState>*;

void send_reply(Self self, const Held& h, StepReply reply) {
  auto& st = self->state;
  reply.step_id = h.step_id;
  reply.received_ns = h.received_ns;
  reply.idle_ns = h.idle_ns;
  reply.draft_blocks_total = st.executor->draft_num_blocks();
  reply.draft_blocks_used = st.executor->draft_used_blocks();
  reply.finished_ns = st.last_finished_ns = steady_now_ns();
  if (auto to = caf::actor_cast<caf::actor>(h.reply_to)) {
    self->send(to, result_atom::value, std::move(reply));
  }
}

void fill(StepReply& reply, Result<StepResult> r, const Executor& ex) {
  reply.compute_ns = ex.last_compute_ns();
  reply.prep_ns = ex.last_prep_ns();
  reply.ahead_ns = ex.last_ahead_ns();
  if (r) {
    reply.skipped = r->skipped;
    reply.result = std::move(r).value();
  } else {
    reply.ok = false;
    reply.error = r.error().message;
  }
}

std::function<void()> injected(const StepFault& fault, uint64_t step_id) {
  if (!fault.throw_in_step) return {};
  return [step_id] { throw std::runtime_error("injected exception in step " + std::to_string(step_id)); };
}

// Without prepare-ahead (ExecutorOptions::prepare_ahead false), or for a
// plan an injected fault fails: the whole step on this thread.
StepReply run_whole(Self self, const StepPlan& plan, const StepFault& fault) {
  auto& st = self->state;
  StepReply reply;
  if (fault.delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(fault.delay_s));
  try {
    if (fault.fail) {
      // As a device error would: nothing of the plan ran, and the plans
      // planned on top of it are skipped.
      reply.ok = false;
      reply.error = "executor: injected fault in step " + std::to_string(plan.step_id);
      st.executor->discard(plan);
    } else {
      fill(reply, st.executor->run(plan, injected(fault, plan.step_id)), *st.executor);
    }
  } catch (const std::exception& e) {
    reply.ok = false;
    reply.error = std::string("executor: ") + e.what();
    st.executor->discard(plan);
  }
  return reply;
}

// Starts the executor's prepared step; its reply goes now when it ended in
// launch(), else when the step thread reports (ran_atom).
void start_clock(ExecutorState& st, Held& h) {
  h.received_ns = steady_now_ns();
  h.idle_ns = st.last_finished_ns ? h.received_ns - st.last_finished_ns : 0;
}

void launch(Self self, Held h) {
  auto& st = self->state;
  start_clock(st, h);
  st.reply_to = h.reply_to;
  Executor::LaunchHooks hooks;
  hooks.inject = injected(h.fault, h.step_id);
  hooks.delay_s = h.fault.delay_s;
  const caf::actor_addr me = self->address();
  hooks.issued = [me](uint64_t id) {
    if (auto a = caf::actor_cast<caf::actor>(me)) caf::anon_send(a, issued_atom::value, id);
  };
  hooks.done = [me](uint64_t id) {
    if (auto a = caf::actor_cast<caf::actor>(me)) caf::anon_send(a, ran_atom::value, id);
  };
  if (auto ended = st.executor->launch(hooks)) {
    StepReply reply;
    fill(reply, std::move(*ended), *st.executor);
    send_reply(self, h, std::move(reply));
    return;
  }
  st.launched = std::move(h);
}

// Runs what can run: the prepared step, else the oldest waiting plan, until
// one is on the step thread; then prepares the next plan while it runs.
void pump(Self self) {
  auto& st = self->state;
  Executor& ex = *st.executor;
  while (!ex.has_launched()) {
    if (ex.has_prepared()) {
      Held h = std::move(*st.prepared);
      st.prepared.reset();
      launch(self, std::move(h));
      continue;
    }
    if (st.waiting.empty()) return;
    auto [plan, h] = std::move(st.waiting.front());
    st.waiting.pop_front();
    if (!ex.prepares_ahead() || h.fault.fail) {
      start_clock(st, h);
      st.reply_to = h.reply_to;
      send_reply(self, h, run_whole(self, plan, h.fault));
      continue;
    }
    ex.prepare(std::move(plan));
    st.prepared = std::move(h);
  }
  if (st.waiting.empty() || ex.has_prepared()) return;
  auto& [plan, h] = st.waiting.front();
  if (h.fault.fail || !ex.can_prepare_ahead(plan)) return;
  ex.prepare(std::move(plan));
  st.prepared = std::move(h);
  st.waiting.pop_front();
}

void on_ran(Self self, uint64_t step_id) {
  auto& st = self->state;
  if (!st.launched || st.launched->step_id != step_id || !st.executor->has_launched()) return;
  Held h = std::move(*st.launched);
  st.launched.reset();
  StepReply reply;
  fill(reply, st.executor->finish(), *st.executor);
  send_reply(self, h, std::move(reply));
  pump(self);
}

caf::behavior executor_fn(Self self, std::shared_ptr<Executor> executor,
                          std::function<StepFault(uint64_t)> fault) {
  self->state.executor = std::move(executor);
  self->state.fault = std::move(fault);
  // Sent from inside run() on this actor's thread (a plan's messages stay in
  // order: its progress before its result); with prepare-ahead the step
  // thread reports through issued_atom instead.
  self->state.executor->set_progress([self](uint64_t step_id) {
    if (auto to = caf::actor_cast<caf::actor>(self->state.reply_to)) self->send(to, progress_atom::value, step_id);
  });
  return {
      [self](step_atom, StepPlan& plan) {
        auto& st = self->state;
        const StepFault fault = st.fault ? st.fault(++st.plans) : StepFault{};
        if (fault.die) {  // a crash: no answer; the executor is freed with the actor
          self->quit(caf::make_error(caf::sec::runtime_error, "executor: injected crash"));
          return;
        }
        Held h;
        h.step_id = plan.step_id;
        h.fault = fault;
        h.reply_to = caf::actor_cast<caf::actor_addr>(self->current_sender());
        st.waiting.emplace_back(std::move(plan), std::move(h));
        pump(self);
      },
      [self](issued_atom, uint64_t step_id) {
        auto& st = self->state;
        if (!st.launched || st.launched->step_id != step_id) return;
        if (auto to = caf::actor_cast<caf::actor>(st.launched->reply_to)) {
          self->send(to, progress_atom::value, step_id);
        }
      },
      [self](ran_atom, uint64_t step_id) { on_ran(self, step_id); },
      [self](reset_atom) {
        // Every plan held was planned against the pool being replaced: the
        // scheduler no longer waits for their answers.
        auto& st = self->state;
        st.waiting.clear();
        st.prepared.reset();
        st.launched.reset();
        st.executor->reset();
      },
  };
}

}  // namespace

caf::actor spawn_executor_actor(caf::actor_system& sys, std::shared_ptr<Executor> executor,
                                std::function<StepFault(uint64_t)> fault_injector) {
  return sys.spawn<caf::detached>(executor_fn, std::move(executor), std::move(fault_injector));
}

}  // namespace pagoda::actors
