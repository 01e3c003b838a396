// The executor actor: spawned detached (its own thread, the only actor that
// blocks), it answers (step_atom, StepPlan) with a StepReply by running the
// plan on its Executor. It owns the Executor: the model, the backend and the
// KV cache are freed when it terminates. Exceptions are turned into a failed
// reply, never a dead actor.
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "actors/executor.hpp"

namespace pagoda::actors {

caf::actor spawn_executor_actor(caf::actor_system& sys, std::shared_ptr<Executor> executor);

}  // namespace pagoda::actors
