// DraftRunner (actors/draft_runner.hpp) on the real SmolLM2 GGUF (skips
// without it): its K/V bookkeeping across proposals. A runner that proposed
// for a sequence, had drafts rejected (truncate) and then proposes for the
// sequence's new history must draft what a fresh runner drafts for that
// history (greedy: the draft K/V holds exactly the ids it should); batched
// rows in different phases (first use, catch-up after a rollback) draft what
// they draft alone; blocks come back on release; a pool too small for a
// row leaves its fillers and keeps nothing.
#include <gtest/gtest.h>

#include <random>

#include "actors/draft_runner.hpp"
#include "formats_test_util.hpp"

namespace pagoda::actors {
namespace {

struct Fixture {
  std::unique_ptr<gpu::Backend> backend;
  std::unique_ptr<DraftRunner> runner;
};

Fixture make(const std::string& path, int32_t blocks, int32_t max_tokens = 64) {
  Fixture f;
  f.backend = std::move(gpu::make_backend(gpu::BackendKind::kCpu, gpu::BackendOptions{})).value();
  DraftRunnerOptions o;
  o.model_path = o.target_path = path;
  o.num_blocks = blocks;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = max_tokens;  // a long catch-up spans rounds
  o.max_model_len = 256;
  o.load.block_size = 16;
  o.load.attention_partition_size = 0;
  model::ModelConfig target;
  auto r = DraftRunner::create(o, *f.backend, target);
  EXPECT_FALSE(r.ok()) << "a target config with another vocabulary size must be refused";
  auto cfg = model::LlamaModel::load(path, *f.backend, o.load);
  target.vocab_size = (*cfg)->config().vocab_size;
  r = DraftRunner::create(o, *f.backend, target);
  EXPECT_TRUE(r.ok()) << r.error().message;
  f.runner = std::move(r).value();
  return f;
}

std::vector<int32_t> drafts(DraftRunner& r, uint64_t seq, const std::vector<int32_t>& history, int k) {
  std::vector<int32_t> d(size_t(k), -5);
  std::vector<gpu::SamplingRowParams> p(size_t(k), gpu::SamplingRowParams{.temperature = 0.0f});
  DraftRow row{seq, history, d, p};
  EXPECT_TRUE(r.propose(std::span<DraftRow>(&row, 1)).ok());
  return d;
}

std::vector<int32_t> random_ids(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(int32_t(100 + rng() % 20000));
  return v;
}

TEST(DraftRunner, RollbackAndCatchUpDraftWhatAFreshRunnerDrafts) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  Fixture a = make(path, 64), b = make(path, 64);
  std::vector<int32_t> h = random_ids(3, 90);  // 90 > 64: the first catch-up takes two rounds
  const auto d1 = drafts(*a.runner, 7, h, 4);
  EXPECT_EQ(d1, drafts(*b.runner, 1, h, 4));
  for (int32_t id : d1) EXPECT_GE(id, 0);
  // No draft accepted (the target's own token instead), then a few tokens
  // decoded without drafting (a cool-down): the K/V of the rejected slots
  // must not be used.
  a.runner->truncate(7, int32_t(h.size()));
  h.push_back(d1[0] == 500 ? 501 : 500);
  for (int32_t id : random_ids(5, 4)) h.push_back(id);
  b.runner->release(1);
  EXPECT_EQ(drafts(*a.runner, 7, h, 3), drafts(*b.runner, 2, h, 3));
  // Batched: a new sequence (first use) beside the caught-up one.
  const auto other = random_ids(9, 20);
  const auto alone = drafts(*b.runner, 3, other, 2);
  const auto seq7 = drafts(*b.runner, 4, h, 3);
  std::vector<int32_t> d7(3), d8(2);
  std::vector<gpu::SamplingRowParams> p(3, gpu::SamplingRowParams{.temperature = 0.0f});
  a.runner->truncate(7, int32_t(h.size()));
  DraftRow rows[2] = {{7, h, d7, p}, {8, other, d8, std::span(p).first(2)}};
  ASSERT_TRUE(a.runner->propose(rows).ok());
  EXPECT_EQ(d7, seq7);
  EXPECT_EQ(d8, alone);
  EXPECT_GT(a.runner->used_blocks(), 0);
  a.runner->release(7);
  a.runner->release(8);
  EXPECT_EQ(a.runner->used_blocks(), 0);
}

TEST(DraftRunner, APoolTooSmallLeavesTheFillers) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  Fixture f = make(path, 2);  // 32 slots
  const auto d = drafts(*f.runner, 1, random_ids(4, 40), 3);
  EXPECT_EQ(d, std::vector<int32_t>(3, -5));
  EXPECT_EQ(f.runner->used_blocks(), 0);
  const auto ok = drafts(*f.runner, 2, random_ids(5, 20), 3);
  EXPECT_NE(ok, std::vector<int32_t>(3, -5));
}

}  // namespace
}  // namespace pagoda::actors
