// The scheduler actor: owns the SchedulerCore and drives it. Every message
// that can make work (a new group, a step's reply, a cancel) calls
// maybe_step(): when no step is in flight and work exists it builds the next
// StepPlan and requests it of the executor; when the reply arrives the core
// applies it and the resulting events go to their request actors, one
// EventBatch per request per step.
//
// It spawns the request actors ((spawn_atom, SpawnRequest)) and forwards
// user cancels to them. Request actors are monitored: when one goes down
// its group is cancelled and its blocks freed. Handles to request actors are
// dropped when their group ends, so no strong cycle outlives a request.
// (stop_atom) cancels every group and is answered once no step is in flight.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <mutex>

#include "actors/engine.hpp"
#include "actors/request_actor.hpp"
#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

// The scheduler's latest statistics, published after every change so that
// any thread can read them without a round trip into the actor system.
class StatsBox {
 public:
  void set(const EngineStats& s) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = s;
  }
  EngineStats get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  // KV snapshots are built only while someone reads them: a reader marks
  // the time it asked; the scheduler publishes when a reader asked within
  // kSnapshotInterest and the last publication is older than
  // kSnapshotInterval (both on its own thread, so at a bounded rate).
  static constexpr std::chrono::milliseconds kSnapshotInterval{100};
  static constexpr std::chrono::seconds kSnapshotInterest{5};
  KvSnapshot read_snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    asked_ = std::chrono::steady_clock::now();
    return snapshot_;
  }
  bool snapshot_due(std::chrono::steady_clock::time_point now) const {
    std::lock_guard<std::mutex> lock(mu_);
    return now - asked_ < kSnapshotInterest && now - published_ >= kSnapshotInterval;
  }
  void publish_snapshot(KvSnapshot s, std::chrono::steady_clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_ = std::move(s);
    published_ = now;
  }

 private:
  mutable std::mutex mu_;
  EngineStats stats_;
  KvSnapshot snapshot_;
  std::chrono::steady_clock::time_point asked_{}, published_{};
};

caf::actor spawn_scheduler_actor(caf::actor_system& sys, std::shared_ptr<SchedulerCore> core,
                                 caf::actor executor, std::shared_ptr<StatsBox> stats,
                                 std::shared_ptr<const RequestContext> context);

}  // namespace pagoda::actors
