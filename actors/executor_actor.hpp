// The executor actor: spawned detached (its own thread, the only actor that
// blocks), it runs each (step_atom, StepPlan) on its Executor in arrival
// order and sends (result_atom, StepReply) back to the sender, with the
// step's timing, and (progress_atom, step_id) once the step's forward pass
// is issued. With ExecutorOptions::prepare_ahead (the default) a step's
// forward pass and sampling run on the executor's step thread while this
// actor prepares the plan that came next, when both are plain
// (Executor::can_prepare_ahead); the step thread reports to the actor
// (anonymous issued/ran messages) and the actor answers the scheduler, so
// replies stay in step order. Without it, each step runs whole here. It
// owns the Executor: the model, the backend and the KV cache are freed when
// it terminates (after the step thread's job ended). Exceptions are turned
// into a failed reply (the step counts as failed: its dependants are
// skipped), never a dead actor. (reset_atom) drops the plans it holds (the
// scheduler no longer waits for them) and makes the Executor forget every
// sequence. A fault injector (tests) may fail, delay or throw in any plan,
// or end the actor without an answer (a crash the scheduler supervises).
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
