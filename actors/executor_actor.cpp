#include "actors/executor_actor.hpp"

#include <exception>

#include "actors/messages.hpp"

namespace pagoda::actors {
namespace {

caf::behavior executor_fn(caf::event_based_actor* self, std::shared_ptr<Executor> executor) {
  (void)self;
  return {
      [executor](step_atom, const StepPlan& plan) -> StepReply {
        StepReply reply;
        try {
          Result<StepResult> r = executor->run(plan);
          if (r) {
            reply.result = std::move(r).value();
          } else {
            reply.ok = false;
            reply.error = r.error().message;
          }
        } catch (const std::exception& e) {
          reply.ok = false;
          reply.error = std::string("executor: ") + e.what();
        }
        return reply;
      },
  };
}

}  // namespace

caf::actor spawn_executor_actor(caf::actor_system& sys, std::shared_ptr<Executor> executor) {
  return sys.spawn<caf::detached>(executor_fn, std::move(executor));
}

}  // namespace pagoda::actors
