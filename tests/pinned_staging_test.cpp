// The pinned-staging ordering rule (gpu/pinned_buffer.hpp) on a fake device
// queue (deferred_backend.hpp: nothing runs until the host waits, every
// upload_async checks that its source was not rewritten before it ran).
// A step that samples nothing never synchronizes, so the next step's
// RunState::stage and BlockTableArena::assign must wait for the uploads that
// still read their pinned buffers: with the fences, a run of such steps gives
// the same logits as the plain CPU backend and no pinned buffer is rewritten
// while an upload from it is pending. The first test shows the fake catches
// exactly that rewrite (it would fail on the code before the fences).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "deferred_backend.hpp"
#include "llama_test_util.hpp"
#include "model/block_table_arena.hpp"
#include "model/run_state.hpp"
#include "tiny_gguf_writer.hpp"

namespace pagoda {
namespace {

using gpu::test::DeferredBackend;
using model::BlockTableArena;
using model::ForwardBatch;
using model::LlamaModel;

std::unique_ptr<DeferredBackend> deferred() {
  return std::make_unique<DeferredBackend>(test::cpu_backend(2));
}

std::vector<int32_t> download_ints(gpu::Backend& be, const gpu::DeviceBuffer& buf, size_t n) {
  std::vector<int32_t> out(n);
  EXPECT_TRUE(be.download(buf, 0, out.data(), n * sizeof(int32_t)).ok());
  return out;
}

TEST(PinnedStaging, FakeQueueCatchesARewriteOfAPendingUpload) {
  auto be = deferred();
  auto dst = be->allocate(64);
  auto pinned = be->allocate_pinned(64);
  ASSERT_TRUE(dst.ok() && pinned.ok());
  int32_t* h = pinned->as<int32_t>();
  std::fill_n(h, 16, 1);
  ASSERT_TRUE(be->upload_async(*dst, 0, h, 64).ok());
  EXPECT_EQ(be->queued(), 1);  // not run yet
  std::fill_n(h, 16, 2);       // the race: no wait_writable()
  const auto back = download_ints(*be, *dst, 16);
  EXPECT_EQ(be->violations(), 1);
  EXPECT_EQ(back[0], 2);  // the copy read the rewritten bytes, as a DMA would
}

TEST(PinnedStaging, WaitWritableRunsThePendingUploadFirst) {
  auto be = deferred();
  auto dst = be->allocate(128);
  auto pinned = be->allocate_pinned(64);
  ASSERT_TRUE(dst.ok() && pinned.ok());
  int32_t* h = pinned->as<int32_t>();
  pinned->wait_writable();  // nothing pending: no wait
  EXPECT_EQ(be->fence_waits(), 0);
  std::iota(h, h + 16, 0);
  ASSERT_TRUE(be->upload_async(*dst, 0, h, 64).ok());
  pinned->uploads_issued();
  EXPECT_TRUE(pinned->upload_pending());
  ASSERT_TRUE(be->upload_async(*dst, 64, h, 64).ok());  // issued after the mark: may stay queued
  pinned->wait_writable();
  EXPECT_FALSE(pinned->upload_pending());
  EXPECT_EQ(be->fence_waits(), 1);
  EXPECT_EQ(be->queued(), 1);  // only what came before the mark ran
  pinned->uploads_issued();
  pinned->wait_writable();
  std::fill_n(h, 16, 7);
  ASSERT_TRUE(be->upload_async(*dst, 64, h, 64).ok());
  pinned->uploads_issued();
  const auto back = download_ints(*be, *dst, 32);
  EXPECT_EQ(be->violations(), 0);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(back[size_t(i)], i);
    EXPECT_EQ(back[size_t(16 + i)], 7);
  }
}

TEST(PinnedStaging, ArenaAssignWaitsForTheLastSync) {
  auto be = deferred();
  {
    auto a = BlockTableArena::create(*be, 2, 8, 100);
    ASSERT_TRUE(a.ok()) << a.error().message;
    const int32_t row = *a->acquire();
    const std::vector<int32_t> first = {5, 6, 7}, more = {40, 41, 42, 43};
    ASSERT_TRUE(a->assign(row, 0, first).ok());
    ASSERT_TRUE(a->sync(*be).ok());
    EXPECT_EQ(be->queued(), 1);  // no synchronize: as after a step that sampled nothing
    ASSERT_TRUE(a->assign(row, 1, more).ok());  // a copy-on-write replacement and growth
    EXPECT_EQ(be->fence_waits(), 1);
    ASSERT_TRUE(a->sync(*be).ok());
    be->synchronize();
    EXPECT_EQ(be->violations(), 0);
    // The device table, read back through the inner (host) memory.
    const int32_t* dev = a->device() + size_t(row) * size_t(a->width());
    const std::vector<int32_t> want = {5, 40, 41, 42, 43};
    EXPECT_EQ(std::vector<int32_t>(dev, dev + 5), want);
  }
}

constexpr int32_t kBlockSize = 16;
constexpr int32_t kCacheBlocks = 12;

// RunState's two staging sets: three stages in a row with no synchronize
// (as three steps that sample nothing, or steps prepared while the one
// before still runs). The second goes into the other set without waiting
// for the first's upload; the third reuses the first set and waits for
// exactly that upload. Each staged step's device ids are its own batch's.
TEST(PinnedStaging, RunStateStagesIntoTheOtherSetWithoutWaiting) {
  auto be = deferred();
  model::LoadOptions o;
  o.precision = model::WeightPrecision::kExact;
  const std::string path =
      test::write_tiny_gguf(test::logits_data("tiny-llama"), "tiny-llama-staging-sets");
  auto m = LlamaModel::load(path, *be, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  model::RunStateLimits lim;
  lim.max_tokens = 16;
  lim.max_seqs = 2;
  lim.max_blocks_per_seq = 2;
  lim.max_logits_rows = 2;
  lim.max_model_len = 32;
  lim.block_size = kBlockSize;
  auto rs = model::RunState::create(*be, (*m)->config(), lim);
  ASSERT_TRUE(rs.ok()) << rs.error().message;
  auto cache = be->create_kv_cache((*m)->kv_cache_spec(), kCacheBlocks);
  ASSERT_TRUE(cache.ok());
  const std::vector<int32_t> table = {3, 4};
  std::vector<ForwardBatch> batches(3);
  std::vector<model::StagedStep> staged;
  const int64_t waits_before = be->fence_waits();
  for (int k = 0; k < 3; ++k) {
    const std::vector<int32_t> ids = {k + 1, k + 2, k + 3};
    batches[size_t(k)].clear(2);
    batches[size_t(k)].add_sequence(ids, 4 * k, table, kBlockSize);
    auto st = rs->stage(*be, batches[size_t(k)], *cache);
    ASSERT_TRUE(st.ok()) << st.error().message;
    staged.push_back(*st);
    EXPECT_EQ(rs->last_set(), k % 2);
    EXPECT_EQ(be->fence_waits() - waits_before, k < 2 ? 0 : 1) << "stage " << k;
  }
  EXPECT_TRUE(rs->upload_pending(0) && rs->upload_pending(1));
  EXPECT_NE(staged[0].token_ids, staged[1].token_ids);
  EXPECT_EQ(staged[0].token_ids, staged[2].token_ids);
  be->synchronize();
  EXPECT_EQ(be->violations(), 0);
  for (int k = 1; k < 3; ++k) {  // the device bytes (host memory under the fake)
    const int32_t* ids = staged[size_t(k)].token_ids;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + 3), batches[size_t(k)].token_ids);
    EXPECT_EQ(staged[size_t(k)].positions[0], 4 * k);
  }
}

// Two sequences: prompts in chunks over two steps that want no logits (no
// sampling, so no download), then a step with logits. Blocks are assigned
// to their arena rows as they grow. Returns the last step's logits.
std::vector<float> run_chunked(gpu::Backend& be, bool device_steps) {
  model::LoadOptions o;
  o.precision = model::WeightPrecision::kExact;
  o.max_num_batched_tokens = 32;
  o.max_num_seqs = 4;
  o.max_logits_rows = 8;
  const std::string path =
      test::write_tiny_gguf(test::logits_data("tiny-llama"), "tiny-llama-staging");
  auto m = LlamaModel::load(path, be, o);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return {};
  auto cache = be.create_kv_cache((*m)->kv_cache_spec(), kCacheBlocks);
  EXPECT_TRUE(cache.ok());
  for (int32_t l = 0; l < cache->num_layers(); ++l) {
    for (void* p : {cache->layer(l).k, cache->layer(l).v}) {
      std::memset(p, 0, size_t(cache->layout().layer_elements()) * sizeof(float));
    }
  }
  auto arena = BlockTableArena::create(be, 4, (*m)->limits().max_blocks_per_seq, kCacheBlocks);
  EXPECT_TRUE(arena.ok());
  const int32_t V = (*m)->config().vocab_size;
  const int32_t rows[2] = {*arena->acquire(), *arena->acquire()};
  std::vector<int32_t> tokens[2], blocks[2];
  int32_t cached[2] = {0, 0}, next_block = kCacheBlocks;
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < 48; ++i) tokens[s].push_back(int32_t((i * 37 + s * 11 + 5) % V));
  }
  const int32_t chunks[3][2] = {{13, 5}, {13, 6}, {14, 1}};  // new tokens per step
  std::vector<float> logits;
  for (int step = 0; step < 3; ++step) {
    const bool last = step == 2;
    for (int s = 0; s < 2; ++s) {  // blocks from the top of the cache down
      while (int32_t(blocks[s].size()) * kBlockSize < cached[s] + chunks[step][s]) {
        blocks[s].push_back(--next_block);
        const std::vector<int32_t> fresh = {blocks[s].back()};
        EXPECT_TRUE(arena->assign(rows[s], int32_t(blocks[s].size()) - 1, fresh).ok());
      }
    }
    EXPECT_TRUE(arena->sync(be).ok());
    ForwardBatch b;
    b.clear((*m)->limits().max_blocks_per_seq);
    for (int s = 0; s < 2; ++s) {
      const std::span<const int32_t> fresh(tokens[s].data() + cached[s], size_t(chunks[step][s]));
      b.add_sequence_row(fresh, cached[s], rows[s], *arena, kBlockSize, /*want_logits=*/last);
      cached[s] += chunks[step][s];
    }
    if (last || !device_steps) {
      logits.assign(size_t(b.num_logits_rows()) * size_t(V), 0.0f);
      auto r = (*m)->forward(b, *cache, logits.data());
      EXPECT_TRUE(r.ok()) << r.error().message;
    } else {
      auto r = (*m)->forward_device(b, *cache);  // returns without waiting
      EXPECT_TRUE(r.ok()) << r.error().message;
    }
  }
  be.synchronize();
  return logits;
}

TEST(PinnedStaging, StepsThatSampleNothingKeepTheirStagedMetadata) {
  auto cpu = test::cpu_backend(2);
  const std::vector<float> want = run_chunked(*cpu, false);
  ASSERT_FALSE(want.empty());
  auto be = deferred();
  const std::vector<float> got = run_chunked(*be, true);
  EXPECT_EQ(be->violations(), 0) << "a pinned buffer was rewritten while its upload was queued";
  EXPECT_GE(be->fence_waits(), 2) << "the later steps should have waited on fences";
  EXPECT_FALSE(be->matmul_failed());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
      << "logits differ from the plain CPU backend's";
}

}  // namespace
}  // namespace pagoda
