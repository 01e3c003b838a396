// StatsBox: the engine's latest statistics and KV snapshot, published by
// the scheduler and block-manager actors so that any thread can read them
// without a round trip into the actor system. Thread-safe (two mutexes: the
// statistics', taken every step, and the snapshot's).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "actors/block_booking.hpp"
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
  // the time it asked; the block-manager actor publishes a capture (flat
  // copies, see KvCapture) when a reader asked within kSnapshotInterest and
  // the last publication is older than kSnapshotInterval (so at a bounded
  // rate), in a message of its own after the booking. The reader assembles
  // the snapshot on its own thread, outside every lock; the snapshot lock is
  // not the one set() takes every step.
  static constexpr std::chrono::milliseconds kSnapshotInterval{100};
  static constexpr std::chrono::seconds kSnapshotInterest{5};
  // Each capture is assembled once, by the first reader that sees it; later
  // readers of the same capture copy that result.
  KvSnapshot read_snapshot() {
    std::shared_ptr<const KvCapture> latest;
    std::shared_ptr<const KvSnapshot> done;
    {
      std::lock_guard<std::mutex> lock(snap_mu_);
      asked_ = std::chrono::steady_clock::now();
      latest = capture_;
      if (assembled_from_ == latest) done = assembled_;
    }
    if (latest == nullptr) return KvSnapshot{};
    if (done != nullptr) return *done;
    auto fresh = std::make_shared<const KvSnapshot>(assemble(*latest));
    std::lock_guard<std::mutex> lock(snap_mu_);
    if (capture_ == latest) {
      assembled_ = fresh;
      assembled_from_ = latest;
    }
    return *fresh;
  }
  bool snapshot_due(std::chrono::steady_clock::time_point now) const {
    std::lock_guard<std::mutex> lock(snap_mu_);
    return now - asked_ < kSnapshotInterest && now - published_ >= kSnapshotInterval;
  }
  void publish_capture(KvCapture c, std::chrono::steady_clock::time_point now) {
    auto fresh = std::make_shared<const KvCapture>(std::move(c));
    std::lock_guard<std::mutex> lock(snap_mu_);
    capture_.swap(fresh);  // the old capture is freed after the unlock
    published_ = now;
  }

 private:
  mutable std::mutex mu_;  // stats_
  EngineStats stats_;
  mutable std::mutex snap_mu_;  // capture_, assembled_*, asked_, published_
  std::shared_ptr<const KvCapture> capture_;
  std::shared_ptr<const KvCapture> assembled_from_;  // the capture assembled_ was built from
  std::shared_ptr<const KvSnapshot> assembled_;
  std::chrono::steady_clock::time_point asked_{}, published_{};
};

}  // namespace pagoda::actors
