// CUDA graphs of decode steps (model/step_graphs.hpp) on the device: the
// tiny dummy model with LoadOptions::step_graphs against the same model
// without, through the scenario of tests/step_graph_checks.hpp (decode
// batches of 1, 3, 5, 8 and 13 sequences over shuffled block tables and
// arena rows; buckets 1, 4, 8 and an eager 13; every graph-side step twice,
// equal within 1e-5 relative (bitwise differences are printed), which
// compares each bucket's eager warm-up with its first replay; a batched prefill in the middle that grows the backend's scratch,
// so that every graph is stale and captured again). Unsplit attention and
// split-K (32-token partitions). Tolerance against the eager model:
// 0.02 + 0.01 * max|logit| (the GEMMs run M = bucket rows instead of n).
// The CPU twin of this test is step_graphs_test (RecordingBackend).
// Skips with the reason without a device or in a build without CUDA.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include "gpu/device.hpp"
#include "tests/step_graph_checks.hpp"

namespace pagoda::test {
namespace {

TEST(ModelGraphCuda, ReplaysMatchEagerAndPaddedWarmUpBitwise) {
  const gpu::DeviceInfo info = gpu::probe_devices();
  if (info.device_count == 0) GTEST_SKIP() << "no CUDA device: " << info.reason;
  for (int32_t partition : {0, 32}) {
    SCOPED_TRACE("partition " + std::to_string(partition));
    auto gb = gpu::make_backend(gpu::BackendKind::kCuda);
    auto eb = gpu::make_backend(gpu::BackendKind::kCuda);
    ASSERT_TRUE(gb.ok() && eb.ok());
    auto g = make_graph_side(std::move(gb).value(), true, partition);
    ASSERT_TRUE(g.ok()) << g.error().message;
    auto e = make_graph_side(std::move(eb).value(), false, partition);
    ASSERT_TRUE(e.ok()) << e.error().message;
    check_step_graphs(*g, *e, 0.02, 0.01, nullptr, /*bitwise=*/false);
  }
}

}  // namespace
}  // namespace pagoda::test

#else

TEST(ModelGraphCuda, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
