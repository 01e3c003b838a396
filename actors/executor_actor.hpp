// The executor actor: spawned detached (its own thread, the only actor that
// blocks), it runs each (step_atom, StepPlan) on its Executor in arrival
// order and sends (result_atom, StepReply) back to the sender, with the
// step's timing. It owns the Executor: the model, the backend and the KV
// cache are freed when it terminates. Exceptions are turned into a failed
// reply (the step counts as failed: its dependants are skipped), never a
// dead actor. (reset_atom) makes the Executor forget every sequence. A
// fault injector (tests) may fail, delay or throw in any plan, or end the
// actor without an answer (a crash the scheduler supervises).
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <memory>

#include "actors/engine_types.hpp"
#include "actors/executor.hpp"

namespace pagoda::actors {

caf::actor spawn_executor_actor(caf::actor_system& sys, std::shared_ptr<Executor> executor,
                                std::function<StepFault(uint64_t)> fault_injector = {});

}  // namespace pagoda::actors
