#include "actors/executor_actor.hpp"

#include <chrono>
#include <exception>
#include <stdexcept>
#include <thread>

#include "actors/messages.hpp"
#include "actors/steady_ns.hpp"

namespace pagoda::actors {
namespace {

struct ExecutorState {
  std::shared_ptr<Executor> executor;
  std::function<StepFault(uint64_t)> fault;
  uint64_t plans = 0;
  int64_t last_finished_ns = 0;
  caf::actor_addr reply_to;  // the sender of the plan being run (weak: no cycle)
};

using Self = caf::stateful_actor<ExecutorState>*;

StepReply run_plan(Self self, const StepPlan& plan, const StepFault& fault) {
  auto& st = self->state;
  StepReply reply;
  reply.step_id = plan.step_id;
  reply.received_ns = steady_now_ns();
  reply.idle_ns = st.last_finished_ns ? reply.received_ns - st.last_finished_ns : 0;
  if (fault.delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(fault.delay_s));
  try {
    if (fault.fail) {
      // As a device error would: nothing of the plan ran, and the plans
      // planned on top of it are skipped.
      reply.ok = false;
      reply.error = "executor: injected fault in step " + std::to_string(plan.step_id);
      st.executor->discard(plan);
    } else {
      std::function<void()> inject;
      if (fault.throw_in_step) {
        inject = [id = plan.step_id] {
          throw std::runtime_error("injected exception in step " + std::to_string(id));
        };
      }
      Result<StepResult> r = st.executor->run(plan, inject);  // catches the step's exceptions
      reply.compute_ns = st.executor->last_compute_ns();
      if (r) {
        reply.skipped = r->skipped;
        reply.result = std::move(r).value();
      } else {
        reply.ok = false;
        reply.error = r.error().message;
      }
    }
  } catch (const std::exception& e) {
    reply.ok = false;
    reply.error = std::string("executor: ") + e.what();
    st.executor->discard(plan);
  }
  reply.draft_blocks_total = st.executor->draft_num_blocks();
  reply.draft_blocks_used = st.executor->draft_used_blocks();
  reply.finished_ns = st.last_finished_ns = steady_now_ns();
  return reply;
}

caf::behavior executor_fn(Self self, std::shared_ptr<Executor> executor,
                          std::function<StepFault(uint64_t)> fault) {
  self->state.executor = std::move(executor);
  self->state.fault = std::move(fault);
  // Sent from inside run(), on this actor's thread (a plan's messages stay
  // in order: its progress before its result).
  self->state.executor->set_progress([self](uint64_t step_id) {
    if (auto to = caf::actor_cast<caf::actor>(self->state.reply_to)) self->send(to, progress_atom::value, step_id);
  });
  return {
      [self](step_atom, const StepPlan& plan) {
        auto& st = self->state;
        auto sender = caf::actor_cast<caf::actor>(self->current_sender());
        const StepFault fault = st.fault ? st.fault(++st.plans) : StepFault{};
        if (fault.die) {  // a crash: no answer; the executor is freed with the actor
          self->quit(caf::make_error(caf::sec::runtime_error, "executor: injected crash"));
          return;
        }
        st.reply_to = caf::actor_cast<caf::actor_addr>(self->current_sender());
        StepReply reply = run_plan(self, plan, fault);
        if (sender) self->send(sender, result_atom::value, std::move(reply));
      },
      [self](reset_atom) { self->state.executor->reset(); },
  };
}

}  // namespace

caf::actor spawn_executor_actor(caf::actor_system& sys, std::shared_ptr<Executor> executor,
                                std::function<StepFault(uint64_t)> fault_injector) {
  return sys.spawn<caf::detached>(executor_fn, std::move(executor), std::move(fault_injector));
}

}  // namespace pagoda::actors
