// StepGraphs: LlamaModel's CUDA graphs of decode steps (gpu-notes §6), one
// per (batch-size bucket, context bucket), captured lazily and replayed.
//
// A decode step of n sequences is padded up to the bucket B >= n (buckets 1,
// 2, 4, 8, then multiples of 8 up to max_bucket) and its metadata staged
// into the fixed-address buffers of RunState::stage_padded, so that every
// op's pointers and scalars depend only on (B, context bucket); the graph
// of those ops is then valid for every step of that key. Per key:
//   1st step: eager (the warm-up: kernels loaded, scratch sized, cuBLAS
//             heuristics chosen) -- nothing may allocate during a capture;
//   2nd step: capture, then replay;
//   later:    replay; a stale graph (the backend reallocated scratch) or a
//             changed fingerprint (another KV cache or block-table arena)
//             is captured again.
// A failed capture runs the step eagerly; after two failures the key stays
// eager for good. Replays compute the same values as the eager launches of
// the same padded step (same kernels, same arguments).
//
// Not thread-safe: the model's one forward thread. Must not outlive the
// backend its graphs came from.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/result.hpp"

namespace pagoda::model {

// What a graph's frozen pointers depend on beyond the model's own buffers.
struct GraphFingerprint {
  const void* cache = nullptr;        // layer 0's K cache
  const int32_t* tables = nullptr;    // the block-table arena's device table
  int32_t table_width = 0;
  bool operator==(const GraphFingerprint&) const = default;
};

struct StepGraphStats {
  uint64_t replays = 0;           // steps run from a graph
  uint64_t eager = 0;             // bucketed steps run eagerly (warm-ups, fallbacks)
  uint64_t captures = 0;          // graphs captured
  uint64_t capture_failures = 0;  // failed captures or replays
  std::string last_failure;       // the latest failure's message
};

class StepGraphs {
 public:
  explicit StepGraphs(int32_t max_bucket);

  // The smallest bucket >= n, or 0 when n is above the largest (or n < 1).
  int32_t bucket_for(int32_t n) const;
  int32_t max_bucket() const { return buckets_.empty() ? 0 : buckets_.back(); }

  // Runs one padded step of key (bucket, context_bucket): eagerly through
  // `issue`, or from the key's graph (see the file comment). `issue` must
  // enqueue exactly the ops of the step, the same every time for one key.
  Result<void> run(gpu::Backend& backend, int32_t bucket, int32_t context_bucket,
                   const GraphFingerprint& fp, const std::function<Result<void>()>& issue);

  const StepGraphStats& stats() const { return stats_; }

 private:
  struct Slot {
    bool warmed = false;
    bool eager_only = false;
    int32_t failures = 0;
    GraphFingerprint fp;
    std::unique_ptr<gpu::OpGraph> graph;
  };
  Result<void> fail(Slot& slot, const std::string& why, const std::function<Result<void>()>& issue);

  std::vector<int32_t> buckets_;
  std::map<std::pair<int32_t, int32_t>, Slot> slots_;
  StepGraphStats stats_;
};

}  // namespace pagoda::model
