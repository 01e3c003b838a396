// The scheduler actor: owns the SchedulerCore and drives it. Every message
// that can make work (a new group, a step's result, a cancel, a timeout)
// calls maybe_step(): while the core can prepare (fewer steps in flight
// than its depth: 2 when scheduling ahead), it books the next step with the
// block-manager actor (one request per step, awaited: nothing else runs in
// between, so the core's state cannot change under the booking), commits
// the reply into a StepPlan and sends it to the executor. When a result arrives
// the core applies it and the events go to their request actors, one
// EventBatch per request per step. A step that is not answered within
// step_timeout_s of its start counts as a hung executor (below). A step
// starts when it becomes the oldest in flight: when it was sent to an idle
// executor, or when the step before it was answered (the executor runs
// steps in order), so a step queued behind another never inherits that
// one's run time. One timer for the oldest step, not one per step.
//
// Supervision: the scheduler monitors the executor and the block manager.
// When one dies (down_msg; for the block manager also a booking answered
// with an error) or the executor hangs past step_timeout_s, the steps in
// flight end their groups with an error, every other running group is
// preempted (recomputed later), and the pool is rebuilt from the
// scheduler's state, which then holds no block: the lost actor is replaced
// (make_executor / make_block_manager: a new Executor loads the model
// again; a hung executor is abandoned, told to exit, and its late answers
// are ignored) and the survivor is reset (reset_atom: a fresh pool with an
// empty prefix cache, or an executor that forgets every sequence). Waiting
// groups then run on the new actors. A replacement that fails leaves the
// engine failed: every group, and every later request, ends with an error.
// The state and the restart counts are published in EngineStats.
//
// It spawns the request actors ((spawn_atom, SpawnRequest)) and forwards
// user cancels to them. Request actors are monitored: when one goes down
// its group is cancelled and its blocks freed. Handles to request actors are
// dropped when their group ends, so no strong cycle outlives a request.
// (stop_atom) cancels every group and is answered once no step is in flight.
// Spawned detached (its own thread) when the engine's threads are dedicated.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "actors/engine_types.hpp"
#include "actors/request_actor.hpp"
#include "actors/scheduler_core.hpp"
#include "actors/stats_box.hpp"

namespace pagoda::actors {

// The executor and block-manager actors in service now (replaced by the
// scheduler when one is lost), for the engine's shutdown and KV snapshots.
// `abandoned` counts hung executors that were replaced and have not ended
// yet (shutdown does not wait for them). Thread-safe.
struct EngineActors {
  std::mutex mu;
  caf::actor executor, block_manager;
  std::atomic<int> abandoned{0};
};

struct SchedulerActorConfig {
  double step_timeout_s = 0.0;  // 0: none
  bool detached = true;
  // Supervision: a replacement actor (called on the scheduler's thread;
  // make_executor loads the model). Empty, or an Error: the engine fails.
  std::function<Result<caf::actor>(caf::actor_system&)> make_executor;
  std::function<Result<caf::actor>(caf::actor_system&)> make_block_manager;
  std::shared_ptr<EngineActors> actors = std::make_shared<EngineActors>();
};

caf::actor spawn_scheduler_actor(caf::actor_system& sys, std::shared_ptr<SchedulerCore> core,
                                 caf::actor block_manager, caf::actor executor,
                                 std::shared_ptr<StatsBox> stats,
                                 std::shared_ptr<const RequestContext> context,
                                 SchedulerActorConfig config);

}  // namespace pagoda::actors
