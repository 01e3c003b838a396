// Decode-step graphs (model/step_graphs.hpp, RunState::stage_padded) on the
// CPU: the RecordingBackend (tests/recording_backend.hpp) gives capture and
// replay CUDA-graph semantics on the host (params frozen at capture, replays
// read memory as it is then), so the model's graph path runs here exactly as
// it issues ops on CUDA: padded staging at bucket-fixed offsets, warm-up,
// capture, replay, staleness, fallback. The scenario is
// tests/step_graph_checks.hpp (the CUDA twin: model_graph_gpu_test). Also:
// the buckets, the fallback when captures fail, and that the graph path
// rejects a bad batch like the eager one.
#include <gtest/gtest.h>

#include "tests/recording_backend.hpp"
#include "tests/step_graph_checks.hpp"

namespace pagoda::test {
namespace {

std::unique_ptr<gpu::test::RecordingBackend> recording() {
  auto cpu = gpu::make_backend(gpu::BackendKind::kCpu, gpu::BackendOptions{0, 2});
  EXPECT_TRUE(cpu.ok());
  return std::make_unique<gpu::test::RecordingBackend>(std::move(cpu).value());
}

GraphSide side(std::unique_ptr<gpu::Backend> backend, bool graphs, int32_t partition) {
  auto s = make_graph_side(std::move(backend), graphs, partition);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return std::move(s).value();
}

TEST(StepGraphs, Buckets) {
  const model::StepGraphs g(40);
  EXPECT_EQ(g.bucket_for(0), 0);
  EXPECT_EQ(g.bucket_for(1), 1);
  EXPECT_EQ(g.bucket_for(2), 2);
  EXPECT_EQ(g.bucket_for(3), 4);
  EXPECT_EQ(g.bucket_for(5), 8);
  EXPECT_EQ(g.bucket_for(9), 16);
  EXPECT_EQ(g.bucket_for(40), 40);
  EXPECT_EQ(g.bucket_for(41), 0);
  EXPECT_EQ(g.max_bucket(), 40);
  EXPECT_EQ(model::StepGraphs(3).bucket_for(3), 0) << "buckets 1, 2 only";
}

TEST(StepGraphs, ReplaysMatchEagerAndPaddedWarmUpBitwise) {
  for (int32_t partition : {0, 32}) {
    SCOPED_TRACE("partition " + std::to_string(partition));
    auto rec = recording();
    gpu::test::RecordingBackend* r = rec.get();
    GraphSide g = side(std::move(rec), true, partition);
    GraphSide e = side(std::move(gpu::make_backend(gpu::BackendKind::kCpu,
                                                   gpu::BackendOptions{0, 2})).value(),
                       false, partition);
    check_step_graphs(g, e, 1e-4, 1e-4, [r] { r->invalidate_graphs(); });
    EXPECT_EQ(r->captures(), 6);
    EXPECT_GT(r->replays(), 30);
  }
}

// Captures that fail: every bucketed step still runs (eagerly, padded), each
// bucket gives up after two failures, and the logits are still right.
TEST(StepGraphs, FailedCapturesFallBackToEager) {
  auto rec = recording();
  rec->refuse_captures(true);
  GraphSide g = side(std::move(rec), true, 0);
  GraphSide e = side(std::move(gpu::make_backend(gpu::BackendKind::kCpu,
                                                 gpu::BackendOptions{0, 2})).value(),
                     false, 0);
  GraphScenario sc(g, e, 1e-4, 1e-4);
  for (int32_t s = 0; s < 13; ++s) sc.prefill({s}, 4 + s, uint32_t(s));
  sc.decode_rounds(3, 1);
  const model::StepGraphStats* st = g.model->graph_stats();
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->captures, 0u);
  EXPECT_EQ(st->replays, 0u);
  EXPECT_EQ(st->capture_failures, 6u) << "two per bucket (1, 4, 8), then eager for good";
  EXPECT_NE(st->last_failure.find("refused"), std::string::npos) << st->last_failure;
}

// A decode batch that is wrong (a slot that disagrees with the table) is an
// Error on the graph path too, before anything is staged or run.
TEST(StepGraphs, BadDecodeBatchIsAnError) {
  GraphSide g = side(recording(), true, 0);
  GraphSide e = side(std::move(gpu::make_backend(gpu::BackendKind::kCpu,
                                                 gpu::BackendOptions{0, 2})).value(),
                     false, 0);
  GraphScenario sc(g, e, 1e-4, 1e-4);
  sc.prefill({0, 1}, 9, 4);
  const int32_t tok = 5;
  model::ForwardBatch b;
  b.clear();
  b.add_sequence_row(std::span(&tok, 1), 9, g.rows[0], *g.arena, kGraphBlockSize);
  b.add_sequence_row(std::span(&tok, 1), 9, g.rows[1], *g.arena, kGraphBlockSize);
  b.slot_mapping[1] += 1;
  std::vector<float> out(size_t(2) * size_t(g.model->config().vocab_size));
  auto ok = g.model->forward(b, g.cache, out.data());
  ASSERT_FALSE(ok.ok());
  EXPECT_NE(ok.error().message.find("slot_mapping"), std::string::npos) << ok.error().message;
}

}  // namespace
}  // namespace pagoda::test
