// The decode-step graph checks (model/step_graphs.hpp) shared by the CUDA
// test (tests/model_graph_gpu_test.cpp: real CUDA graphs) and the CPU test
// (tests/step_graphs_test.cpp: RecordingBackend, the same semantics on the
// host). Two sides load the same dummy tiny model (model/configs/tiny): the
// graph side with LoadOptions::step_graphs, the eager side without. Both
// get the same sequences on the same shuffled physical blocks, through
// block-table arenas whose rows are acquired in a shuffled order, and run:
//   - a prefill per sequence (eager: not a decode step);
//   - rounds of decode steps over 1, 3, 5, 8 and 13 sequences (buckets 1,
//     4, 8, 8 and, above step_graph_max_batch = 8, eager), each over a
//     freshly shuffled subset; every graph-side step runs twice (a decode
//     step is idempotent: the same K/V land in the same slots), and the two
//     results must be bitwise equal (CUDA: within 1e-5 relative, bitwise
//     differences counted: cuBLAS does not promise the same kernel choice
//     under capture): the first time a bucket is seen that is its eager
//     warm-up against its first replay, later replay against replay;
//   - a batched prefill of three 200-token prompts in the middle (it grows
//     the CUDA backend's scratch, so every graph goes stale and must be
//     captured again; the CPU test invalidates them by hand), then more
//     rounds;
// and every graph-side logits row must match the eager side within `tol`
// (the GEMMs see M = bucket rows instead of n, so the summation order may
// differ). Counters: captures (one per bucket, again after the prefill),
// replays, no capture failure.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "model/block_table_arena.hpp"
#include "model/llama_model.hpp"

namespace pagoda::test {

constexpr int32_t kGraphBlockSize = 16;
constexpr int32_t kGraphMaxModelLen = 256;
constexpr int32_t kGraphSeqs = 16;
constexpr int32_t kGraphBlocks = kGraphSeqs * (kGraphMaxModelLen / kGraphBlockSize) + 1;

struct GraphSide {
  std::unique_ptr<gpu::Backend> backend;
  std::unique_ptr<model::LlamaModel> model;
  gpu::KvCache cache;
  std::optional<model::BlockTableArena> arena;
  std::vector<int32_t> rows;  // arena row of each sequence
};

inline std::string tiny_config_dir() {
  return std::string(PAGODA_TEST_DATA_DIR) + "/../../model/configs/tiny";
}

// partition: the attention partition size (0: unsplit; > 0 split-K).
inline Result<GraphSide> make_graph_side(std::unique_ptr<gpu::Backend> backend, bool graphs,
                                         int32_t partition) {
  GraphSide s;
  s.backend = std::move(backend);
  model::LoadOptions lo;
  lo.load_format = model::LoadFormat::kDummy;
  lo.precision = s.backend->kind() == gpu::BackendKind::kCpu ? model::WeightPrecision::kExact
                                                              : model::WeightPrecision::kQuantized;
  lo.max_num_batched_tokens = 1024;
  lo.max_num_seqs = kGraphSeqs;
  lo.max_model_len = kGraphMaxModelLen;
  lo.block_size = kGraphBlockSize;
  lo.attention_partition_size = partition;
  lo.step_graphs = graphs;
  lo.step_graph_max_batch = 8;
  auto m = model::LlamaModel::load(tiny_config_dir(), *s.backend, lo);
  if (!m) return m.error();
  s.model = std::move(m).value();
  auto c = s.backend->create_kv_cache(s.model->kv_cache_spec(), kGraphBlocks);
  if (!c) return c.error();
  s.cache = std::move(c).value();
  auto a = model::BlockTableArena::create(*s.backend, kGraphSeqs,
                                          kGraphMaxModelLen / kGraphBlockSize, kGraphBlocks);
  if (!a) return a.error();
  s.arena.emplace(std::move(a).value());
  // Rows acquired in a shuffled order: sequence i gets row order[i].
  std::vector<int32_t> all;
  for (int32_t i = 0; i < kGraphSeqs; ++i) all.push_back(*s.arena->acquire());
  std::shuffle(all.begin(), all.end(), std::mt19937(11));
  s.rows = all;
  return s;
}

// One sequence's tokens so far and its blocks (the same on both sides).
struct GraphSeq {
  std::vector<int32_t> tokens;
  int32_t cached = 0;  // tokens in the cache
};

class GraphScenario {
 public:
  // bitwise: the same step twice on the graph side must agree bit for bit
  // (else within 1e-5 + 1e-5 max|logit|, the differing count printed).
  GraphScenario(GraphSide& graph, GraphSide& eager, double atol, double rtol, bool bitwise = true)
      : g_(graph), e_(eager), atol_(atol), rtol_(rtol), bitwise_(bitwise) {
    vocab_ = g_.model->config().vocab_size;
    std::vector<int32_t> pool(kGraphBlocks - 1);
    std::iota(pool.begin(), pool.end(), 1);
    std::shuffle(pool.begin(), pool.end(), std::mt19937(3));
    // Every sequence gets the blocks of a full-length context up front.
    const int32_t per_seq = kGraphMaxModelLen / kGraphBlockSize;
    for (int32_t s = 0; s < kGraphSeqs; ++s) {
      const std::vector<int32_t> blocks(pool.begin() + s * per_seq,
                                        pool.begin() + (s + 1) * per_seq);
      for (GraphSide* side : {&g_, &e_}) {
        EXPECT_TRUE(side->arena->assign(side->rows[size_t(s)], 0, blocks).ok());
      }
    }
    for (GraphSide* side : {&g_, &e_}) EXPECT_TRUE(side->arena->sync(*side->backend).ok());
    seqs_.resize(kGraphSeqs);
  }

  // Prefill of the given sequences in one step (new prompts of `len` tokens).
  void prefill(const std::vector<int32_t>& which, int32_t len, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int32_t s : which) {
      for (int32_t i = 0; i < len + int32_t(rng() % 7); ++i) {
        seqs_[size_t(s)].tokens.push_back(3 + int32_t(rng() % uint32_t(vocab_ - 3)));
      }
    }
    step(which, false, "prefill");
  }

  // One decode step over `which` (a fresh token each), graph side twice.
  void decode(const std::vector<int32_t>& which, uint32_t seed, const std::string& what) {
    std::mt19937 rng(seed);
    for (int32_t s : which) {
      seqs_[size_t(s)].tokens.push_back(3 + int32_t(rng() % uint32_t(vocab_ - 3)));
    }
    step(which, true, what);
  }

  // The standard schedule: `rounds` rounds of decode steps over 1, 3, 5, 8,
  // 13 of the first 13 sequences, each a shuffled subset.
  void decode_rounds(int rounds, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int r = 0; r < rounds; ++r) {
      for (int32_t n : {1, 3, 5, 8, 13}) {
        std::vector<int32_t> order(13);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        order.resize(size_t(n));
        decode(order, rng(), "round " + std::to_string(r) + " n=" + std::to_string(n));
      }
    }
  }

  double worst() const { return worst_; }

 private:
  model::ForwardBatch batch(GraphSide& side, const std::vector<int32_t>& which) const {
    model::ForwardBatch b;
    b.clear();
    for (int32_t s : which) {
      const GraphSeq& q = seqs_[size_t(s)];
      const std::span<const int32_t> fresh(q.tokens.data() + q.cached,
                                           q.tokens.size() - size_t(q.cached));
      b.add_sequence_row(fresh, q.cached, side.rows[size_t(s)], *side.arena, kGraphBlockSize);
    }
    return b;
  }

  std::vector<float> run(GraphSide& side, const model::ForwardBatch& b, const std::string& what) {
    std::vector<float> out(size_t(b.num_logits_rows()) * size_t(vocab_));
    auto ok = side.model->forward(b, side.cache, out.data());
    EXPECT_TRUE(ok.ok()) << what << ": " << (ok.ok() ? "" : ok.error().message);
    return out;
  }

  void step(const std::vector<int32_t>& which, bool twice, const std::string& what) {
    const model::ForwardBatch gb = batch(g_, which), eb = batch(e_, which);
    const std::vector<float> want = run(e_, eb, what + " eager");
    const std::vector<float> got = run(g_, gb, what + " graph");
    if (twice) {
      const std::vector<float> again = run(g_, gb, what + " graph again");
      size_t differ = 0;
      double far = 0, max_got = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        differ += std::memcmp(&got[i], &again[i], 4) != 0;
        far = std::max(far, std::fabs(double(got[i]) - double(again[i])));
        max_got = std::max(max_got, double(std::fabs(got[i])));
      }
      if (bitwise_) {
        EXPECT_EQ(differ, 0u) << what << ": the same step twice on the graph side differs in "
                              << differ << " of " << got.size() << " logits";
      } else {
        if (differ > 0) {
          std::printf("[%s] twice: %zu logits not bitwise equal\n", what.c_str(), differ);
        }
        EXPECT_LE(far, 1e-5 + 1e-5 * max_got) << what << ": the same step twice differs";
      }
    }
    double max_ref = 0;
    for (float v : want) max_ref = std::max(max_ref, double(std::fabs(v)));
    const double tol = atol_ + rtol_ * max_ref;
    double worst = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!std::isfinite(got[i])) ++nonfinite;
      worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])) / tol);
    }
    worst_ = std::max(worst_, worst);
    EXPECT_EQ(nonfinite, 0u) << what;
    EXPECT_LE(worst, 1.0) << what << ": graph-side logits differ from eager beyond tolerance";
    for (int32_t s : which) seqs_[size_t(s)].cached = int32_t(seqs_[size_t(s)].tokens.size());
  }

  GraphSide& g_;
  GraphSide& e_;
  double atol_, rtol_;
  bool bitwise_;
  int32_t vocab_ = 0;
  std::vector<GraphSeq> seqs_;
  double worst_ = 0;
};

// The whole scenario; `invalidate` runs after the mid-way batched prefill
// (the CPU test drops its graphs there; CUDA's grown scratch does it).
inline void check_step_graphs(GraphSide& graph, GraphSide& eager, double atol, double rtol,
                              const std::function<void()>& invalidate, bool bitwise = true) {
  GraphScenario sc(graph, eager, atol, rtol, bitwise);
  for (int32_t s = 0; s < 13; ++s) sc.prefill({s}, 5 + 6 * s, uint32_t(100 + s));
  sc.decode_rounds(3, 7);
  const model::StepGraphStats* st = graph.model->graph_stats();
  ASSERT_NE(st, nullptr);
  std::printf("after 3 rounds: captures %llu, replays %llu, eager %llu, failures %llu %s\n",
              (unsigned long long)st->captures, (unsigned long long)st->replays,
              (unsigned long long)st->eager, (unsigned long long)st->capture_failures,
              st->last_failure.c_str());
  EXPECT_EQ(st->capture_failures, 0u) << st->last_failure;
  EXPECT_EQ(st->captures, 3u) << "one graph per bucket seen: 1, 4, 8";
  EXPECT_GT(st->replays, 20u);
  const uint64_t captures = st->captures;
  sc.prefill({13, 14, 15}, 200, 55);  // 600+ rows: grows the scratch
  if (invalidate) invalidate();
  sc.decode_rounds(2, 8);
  sc.decode({13, 14, 15, 0}, 9, "the new sequences (bucket 4)");
  std::printf("at the end: captures %llu, replays %llu, eager %llu, failures %llu; worst "
              "err/tol %.4f\n",
              (unsigned long long)st->captures, (unsigned long long)st->replays,
              (unsigned long long)st->eager, (unsigned long long)st->capture_failures,
              sc.worst());
  EXPECT_EQ(st->capture_failures, 0u) << st->last_failure;
  EXPECT_EQ(st->captures, captures + 3) << "stale graphs captured again once each";
}

}  // namespace pagoda::test
