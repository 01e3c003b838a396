// StatsBox: the engine's latest statistics and KV snapshot, published by
// the scheduler and block-manager actors so that any thread can read them
// without a round trip into the actor system. Thread-safe (one mutex).
#pragma once

#include <chrono>
#include <mutex>

#include "actors/engine_types.hpp"

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

}  // namespace pagoda::actors
