// ForwardBatch's arena mode (model/block_table_arena.hpp) through
// LlamaModel::forward on the tiny llama (CPU backend): a multi-step run that
// mixes prefill chunks and decodes over shuffled physical blocks, sequences
// on arena rows acquired out of order (the other rows hold decoy tables),
// gives logits bitwise identical to the dense mode's on the same steps; bad
// arena batches are Errors before the cache is touched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "llama_test_util.hpp"
#include "model/block_table_arena.hpp"
#include "tiny_gguf_writer.hpp"

namespace pagoda {
namespace {

using model::BlockTableArena;
using model::ForwardBatch;
using model::LlamaModel;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kCacheBlocks = 12;

class ForwardArena : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = test::cpu_backend(2).release();
    const std::string path =
        test::write_tiny_gguf(test::logits_data("tiny-llama"), "tiny-llama-arena");
    model::LoadOptions o;
    o.precision = model::WeightPrecision::kExact;
    o.max_num_batched_tokens = 32;
    o.max_num_seqs = 4;
    o.max_logits_rows = 8;
    auto m = LlamaModel::load(path, *backend_, o);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete backend_;
  }

  static gpu::KvCache make_cache(float fill) {
    auto c = backend_->create_kv_cache(model_->kv_cache_spec(), kCacheBlocks);
    EXPECT_TRUE(c.ok());
    for (int32_t l = 0; l < c->num_layers(); ++l) {
      for (void* p : {c->layer(l).k, c->layer(l).v}) {
        std::fill_n(static_cast<float*>(p), c->layout().layer_elements(), fill);
      }
    }
    return std::move(c).value();
  }
  static bool all_equal(const gpu::KvCache& c, float v) {
    for (int32_t l = 0; l < c.num_layers(); ++l) {
      for (const void* p : {c.layer(l).k, c.layer(l).v}) {
        const float* f = static_cast<const float*>(p);
        for (int64_t i = 0; i < c.layout().layer_elements(); ++i) {
          if (f[i] != v) return false;
        }
      }
    }
    return true;
  }
  static BlockTableArena make_arena(int32_t rows, int32_t blocks = kCacheBlocks) {
    auto a = BlockTableArena::create(*backend_, rows, model_->limits().max_blocks_per_seq, blocks);
    EXPECT_TRUE(a.ok()) << a.error().message;
    return std::move(a).value();
  }

  static gpu::Backend* backend_;
  static LlamaModel* model_;
};
gpu::Backend* ForwardArena::backend_ = nullptr;
LlamaModel* ForwardArena::model_ = nullptr;

// One sequence of the scenario: all its tokens, dense table and arena row.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int32_t cached = 0;
  int32_t row = -1;
};

// A step: (sequence, new tokens) in batch order, then padding rows.
struct Step {
  std::vector<std::pair<int, int32_t>> seqs;
  int32_t padding = 0;
};

// Prefill chunks beside decodes, then decodes in rotating batch orders; every
// sequence crosses a block boundary. At most 32 rows per step.
std::vector<Step> scenario() {
  std::vector<Step> steps = {{{{0, 20}, {1, 9}, {2, 2}}, 1}, {{{1, 1}, {0, 10}, {2, 3}}, 2}};
  const int orders[3][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
  for (int i = 0; i < 12; ++i) {
    Step st;
    for (int s : orders[i % 3]) st.seqs.push_back({s, 1});
    steps.push_back(st);
  }
  return steps;
}

// Fills every row of `a` with valid decoy ids (acquiring all of them), syncs,
// then releases `order`, so that the next acquires return it reversed.
void decoy_rows(gpu::Backend& be, BlockTableArena& a, const std::vector<int32_t>& order,
                std::mt19937& rng) {
  std::vector<int32_t> ids(size_t(a.width()));
  for (int32_t r = 0; r < a.rows(); ++r) {
    auto got = a.acquire();
    ASSERT_TRUE(got.ok());
    for (auto& id : ids) id = int32_t(rng() % uint32_t(a.num_blocks()));
    ASSERT_TRUE(a.assign(*got, 0, ids).ok());
  }
  ASSERT_TRUE(a.sync(be).ok());
  for (int32_t r : order) a.release(r);
}

// Gives sequence s the blocks for `ctx` tokens from `pool`; in arena mode the
// new ones also go to its row (assigned, not yet synced).
void grow(Seq& s, int32_t ctx, std::vector<int32_t>& pool, BlockTableArena* arena) {
  std::vector<int32_t> fresh;
  while (int32_t(s.blocks.size()) * kBlockSize < ctx) {
    fresh.push_back(pool.back());
    pool.pop_back();
    s.blocks.push_back(fresh.back());
  }
  if (arena != nullptr && !fresh.empty()) {
    auto ok = arena->assign(s.row, int32_t(s.blocks.size() - fresh.size()), fresh);
    ASSERT_TRUE(ok.ok()) << ok.error().message;
  }
}

// Runs the scenario in dense or arena mode; the logits of every step.
std::vector<std::vector<float>> run_scenario(LlamaModel& m, gpu::Backend& be,
                                             gpu::KvCache& cache, BlockTableArena& arena,
                                             bool use_arena) {
  std::mt19937 rng(2024);
  std::vector<int32_t> pool(kCacheBlocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  decoy_rows(be, arena, {6, 1, 3}, rng);
  std::vector<Seq> seqs(3);
  const int32_t V = m.config().vocab_size;
  for (Seq& s : seqs) {
    s.row = *arena.acquire();  // 3, 1, 6: row 0 (any batch's first) is always a decoy
    for (int i = 0; i < 64; ++i) s.tokens.push_back(int32_t(rng() % uint32_t(V)));
  }
  std::vector<std::vector<float>> out;
  for (const Step& st : scenario()) {
    ForwardBatch b;
    b.clear(m.limits().max_blocks_per_seq);
    for (auto [i, n] : st.seqs) {
      grow(seqs[size_t(i)], seqs[size_t(i)].cached + n, pool, use_arena ? &arena : nullptr);
    }
    if (use_arena) {
      EXPECT_TRUE(arena.sync(be).ok());
    }
    for (auto [i, n] : st.seqs) {
      Seq& s = seqs[size_t(i)];
      const std::span<const int32_t> fresh(s.tokens.data() + s.cached, size_t(n));
      if (use_arena) {
        b.add_sequence_row(fresh, s.cached, s.row, arena, kBlockSize);
      } else {
        b.add_sequence(fresh, s.cached, s.blocks, kBlockSize);
      }
      s.cached += n;
    }
    b.add_padding(st.padding);
    out.emplace_back(size_t(b.num_logits_rows()) * size_t(V));
    auto r = m.forward(b, cache, out.back().data());
    EXPECT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(b.block_tables.empty(), use_arena);
  }
  return out;
}

TEST_F(ForwardArena, LogitsEqualDenseModeBitwise) {
  gpu::KvCache dense_cache = make_cache(0.0f), arena_cache = make_cache(0.0f);
  BlockTableArena a1 = make_arena(8), a2 = make_arena(8);
  const auto dense = run_scenario(*model_, *backend_, dense_cache, a1, false);
  const auto arena = run_scenario(*model_, *backend_, arena_cache, a2, true);
  ASSERT_EQ(dense.size(), arena.size());
  for (size_t i = 0; i < dense.size(); ++i) {
    ASSERT_EQ(dense[i].size(), arena[i].size()) << "step " << i;
    ASSERT_FALSE(dense[i].empty());
    EXPECT_EQ(std::memcmp(dense[i].data(), arena[i].data(), dense[i].size() * sizeof(float)), 0)
        << "step " << i << ": arena logits differ from dense";
  }
}

TEST_F(ForwardArena, BadArenaBatchesAreErrorsBeforeTheCacheIsTouched) {
  gpu::KvCache cache = make_cache(7.0f);
  BlockTableArena arena = make_arena(4), other_arena = make_arena(4);
  BlockTableArena too_big = make_arena(4, kCacheBlocks + 1);
  auto foreign_backend = test::cpu_backend(1);
  auto foreign = BlockTableArena::create(*foreign_backend, 4, 16, kCacheBlocks);
  ASSERT_TRUE(foreign.ok());
  for (BlockTableArena* a : {&arena, &other_arena, &too_big, &*foreign}) {
    ASSERT_EQ(*a->acquire(), 0);
    ASSERT_EQ(*a->acquire(), 1);
    ASSERT_TRUE(a->assign(1, 0, std::vector<int32_t>{5}).ok());
  }
  ASSERT_TRUE(arena.sync(*backend_).ok() && other_arena.sync(*backend_).ok() &&
              too_big.sync(*backend_).ok() && foreign->sync(*foreign_backend).ok());
  const std::vector<int32_t> ids = {5, 6, 7};
  auto on = [&](const BlockTableArena& a, int32_t cached = 0) {
    ForwardBatch b;
    b.clear();
    b.add_sequence_row(ids, cached, 1, a, kBlockSize);
    return b;
  };
  struct Case {
    const char* what;
    std::function<ForwardBatch()> make;
  };
  const Case cases[] = {
      {"table_rows[0] = 2 is not an acquired", [&] {
         auto b = on(arena);
         b.table_rows[0] = 2;
         return b;
       }},
      {"table_rows[0] = 99", [&] { auto b = on(arena); b.table_rows[0] = 99; return b; }},
      {"context_lens", [&] { return on(arena, 14); }},  // 17 tokens, the row covers 16
      {"slot_mapping", [&] { auto b = on(arena); b.slot_mapping[1] += 1; return b; }},
      {"positions", [&] { auto b = on(arena); b.positions[2] = 0; return b; }},
      {"mixed modes", [&] { auto b = on(arena); b.block_tables = {5}; return b; }},
      {"table_rows must have S", [&] { auto b = on(arena); b.table_rows.push_back(1); return b; }},
      {"table_rows[1] = -1", [&] {  // a second arena in one batch
         auto b = on(arena);
         b.add_sequence_row(ids, 0, 1, other_arena, kBlockSize);
         return b;
       }},
      {"KV cache has", [&] { return on(too_big); }},
      {"another backend", [&] { return on(*foreign); }},
  };
  std::vector<float> logits(size_t(model_->config().vocab_size) * 4);
  for (const Case& c : cases) {
    auto r = model_->forward(c.make(), cache, logits.data());
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.error().message.find(c.what), std::string::npos) << r.error().message;
    EXPECT_TRUE(all_equal(cache, 7.0f)) << c.what << ": a rejected batch wrote the cache";
  }
  // Not synced since the last assign: an Error until sync().
  const ForwardBatch good = on(arena);
  ASSERT_TRUE(arena.assign(1, 1, std::vector<int32_t>{3}).ok());
  auto unsynced = model_->forward(good, cache, logits.data());
  ASSERT_FALSE(unsynced.ok());
  EXPECT_NE(unsynced.error().message.find("sync()"), std::string::npos)
      << unsynced.error().message;
  EXPECT_TRUE(all_equal(cache, 7.0f));
  ASSERT_TRUE(arena.sync(*backend_).ok());
  auto ok = model_->forward(good, cache, logits.data());
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_FALSE(all_equal(cache, 7.0f));
}

}  // namespace
}  // namespace pagoda
