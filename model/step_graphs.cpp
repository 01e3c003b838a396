#include "model/step_graphs.hpp"

#include <algorithm>
#include <cstdio>

namespace pagoda::model {

StepGraphs::StepGraphs(int32_t max_bucket) {
  for (int32_t b : {1, 2, 4}) {
    if (b <= max_bucket) buckets_.push_back(b);
  }
  for (int32_t b = 8; b <= max_bucket; b += 8) buckets_.push_back(b);
}

int32_t StepGraphs::bucket_for(int32_t n) const {
  if (n < 1) return 0;
  const auto it = std::lower_bound(buckets_.begin(), buckets_.end(), n);
  return it == buckets_.end() ? 0 : *it;
}

// A failed capture or replay: this step runs eagerly; the second failure of
// a key keeps it eager. The first failure is also printed (once per model),
// so that a check run's log says why decode steps are not replayed.
Result<void> StepGraphs::fail(Slot& slot, const std::string& why,
                              const std::function<Result<void>()>& issue) {
  if (stats_.capture_failures == 0) {
    std::fprintf(stderr, "pagoda: CUDA graph for a decode step failed, running it eagerly: %s\n",
                 why.c_str());
  }
  ++stats_.capture_failures;
  stats_.last_failure = why;
  slot.graph.reset();
  if (++slot.failures >= 2) slot.eager_only = true;
  ++stats_.eager;
  return issue();
}

Result<void> StepGraphs::run(gpu::Backend& backend, int32_t bucket, int32_t context_bucket,
                             const GraphFingerprint& fp,
                             const std::function<Result<void>()>& issue) {
  Slot& slot = slots_[{bucket, context_bucket}];
  if (slot.eager_only || !slot.warmed) {
    slot.warmed = true;
    ++stats_.eager;
    return issue();
  }
  if (slot.graph && slot.fp == fp) {
    if (backend.replay(*slot.graph)) {
      ++stats_.replays;
      return {};
    }
    slot.graph.reset();  // stale (scratch moved): captured again below
  }
  auto graph = backend.capture(issue);
  if (!graph) return fail(slot, graph.error().message, issue);
  slot.graph = std::move(graph).value();
  slot.fp = fp;
  ++stats_.captures;
  if (auto ok = backend.replay(*slot.graph); !ok) return fail(slot, ok.error().message, issue);
  ++stats_.replays;
  return {};
}

}  // namespace pagoda::model
