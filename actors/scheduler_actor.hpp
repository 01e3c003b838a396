// The scheduler actor: owns the SchedulerCore and drives it. Every message
// that can make work (a new group, a step's result, a cancel, a timeout)
// calls maybe_step(): while the core can prepare (fewer steps in flight
// than its depth: 2 when scheduling ahead), it books the next step with the
// block-manager actor (one request per step, awaited: nothing else runs in
// between, so the core's state cannot change under the booking), commits
// the reply into a StepPlan and sends it to the executor. When a result arrives
// the core applies it and the events go to their request actors, one
// EventBatch per request per step. A step that is not answered within
// step_timeout_s of being sent is failed by a watchdog (one timer for the
// oldest deadline, not one per step).
//
// It spawns the request actors ((spawn_atom, SpawnRequest)) and forwards
// user cancels to them. Request actors are monitored: when one goes down
// its group is cancelled and its blocks freed. Handles to request actors are
// dropped when their group ends, so no strong cycle outlives a request.
// (stop_atom) cancels every group and is answered once no step is in flight.
// Spawned detached (its own thread) when the engine's threads are dedicated.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <mutex>

#include "actors/engine.hpp"
#include "actors/request_actor.hpp"
#include "actors/scheduler_core.hpp"
#include "actors/stats_box.hpp"

namespace pagoda::actors {

struct SchedulerActorConfig {
  double step_timeout_s = 0.0;  // 0: none
  bool detached = true;
};

caf::actor spawn_scheduler_actor(caf::actor_system& sys, std::shared_ptr<SchedulerCore> core,
                                 caf::actor block_manager, caf::actor executor,
                                 std::shared_ptr<StatsBox> stats,
                                 std::shared_ptr<const RequestContext> context,
                                 SchedulerActorConfig config);

}  // namespace pagoda::actors
