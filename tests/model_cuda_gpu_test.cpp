// The whole forward pass on CUDA against the CPU backend, on a tiny model:
// logits of prefill, chunked prefill (a second chunk over cached context,
// mixed with decode rows) and decode batches, every sequence on shuffled
// physical blocks, padding rows at the end.
//
// The model: $PAGODA_GPU_MODEL (an HF directory, e.g. the GPU bundle's
// tools/gen-tiny-model.py output, read from its safetensors), else random
// weights (--load-format dummy) of model/configs/tiny. Both backends hold the
// same numbers: BF16 values, fp32 on the CPU (exact precision), BF16 on CUDA.
// Tolerance: |gpu - cpu| <= 0.05 + 0.02 * max|cpu| over each batch (BF16
// activations in the GEMMs; layout or indexing bugs give errors of the order
// of the logits themselves); the worst ratio is printed. Greedy choices must
// agree on >= 90% of rows (near-ties may flip); the rate is printed.
// Skips with the reason without a CUDA device, or in a build without CUDA;
// with PAGODA_GPU_TEST_SELFCHECK=1 and no device it runs the harness CPU vs
// CPU instead (the "CUDA" side then also uses the CPU backend at BF16-storage
// precision), to check the batches and comparisons themselves.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "gpu/backend.hpp"
#include "gpu/device.hpp"
#include "model/llama_model.hpp"

namespace pagoda {
namespace {

using model::ForwardBatch;
using model::LlamaModel;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 96;

struct Side {
  std::unique_ptr<gpu::Backend> backend;
  std::unique_ptr<LlamaModel> model;
  gpu::KvCache cache;
};

// The model under test and whether it is dummy: see the file comment.
std::pair<std::string, bool> model_source() {
  if (const char* p = std::getenv("PAGODA_GPU_MODEL"); p != nullptr && *p != '\0') return {p, false};
  return {std::string(PAGODA_TEST_DATA_DIR) + "/../../model/configs/tiny", true};
}

Result<Side> make_side(gpu::BackendKind kind) {
  Side s;
  auto b = gpu::make_backend(kind);
  if (!b) return b.error();
  s.backend = std::move(b).value();
  model::LoadOptions lo;
  const auto [path, dummy] = model_source();
  lo.load_format = dummy ? model::LoadFormat::kDummy : model::LoadFormat::kAuto;
  lo.precision = kind == gpu::BackendKind::kCpu ? model::WeightPrecision::kExact
                                                 : model::WeightPrecision::kQuantized;
  lo.max_num_batched_tokens = 256;
  lo.max_num_seqs = 8;
  lo.max_logits_rows = 64;  // the prefill step asks for every row of one sequence
  lo.max_model_len = 512;
  lo.block_size = kBlockSize;
  lo.attention_partition_size = kind == gpu::BackendKind::kCpu ? 0 : -1;  // CUDA: its split-K
  auto m = LlamaModel::load(path, *s.backend, lo);
  if (!m) return m.error();
  s.model = std::move(m).value();
  auto c = s.backend->create_kv_cache(s.model->kv_cache_spec(), kNumBlocks);
  if (!c) return c.error();
  s.cache = std::move(c).value();
  return s;
}

class ModelCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    const gpu::DeviceInfo info = gpu::probe_devices();
    const bool self = std::getenv("PAGODA_GPU_TEST_SELFCHECK") != nullptr;
    if (info.device_count == 0 && !self) GTEST_SKIP() << "no CUDA device: " << info.reason;
    if (info.device_count == 0) std::printf("self-check: CPU vs CPU (no CUDA device)\n");
    auto g = make_side(info.device_count > 0 ? gpu::BackendKind::kCuda : gpu::BackendKind::kCpu);
    ASSERT_TRUE(g.ok()) << g.error().message;
    gpu_ = std::move(g).value();
    auto c = make_side(gpu::BackendKind::kCpu);
    ASSERT_TRUE(c.ok()) << c.error().message;
    cpu_ = std::move(c).value();
    vocab_ = cpu_.model->config().vocab_size;
    // Physical blocks handed out in a shuffled order (block 0 is never used:
    // padded table entries point there).
    pool_.resize(kNumBlocks - 1);
    std::iota(pool_.begin(), pool_.end(), 1);
    std::shuffle(pool_.begin(), pool_.end(), std::mt19937(5));
  }

  // Blocks for a sequence of `tokens` tokens, taken from the shuffled pool.
  std::vector<int32_t> take_blocks(int32_t tokens) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < (tokens + kBlockSize - 1) / kBlockSize; ++i) {
      t.push_back(pool_.back());
      pool_.pop_back();
    }
    return t;
  }

  // Runs the batch on both sides; compares; returns the CPU's greedy tokens per logits row.
  std::vector<int32_t> run_both(const ForwardBatch& batch, const std::string& what) {
    const size_t rows = size_t(batch.num_logits_rows());
    std::vector<float> lc(rows * size_t(vocab_)), lg(rows * size_t(vocab_));
    auto rc = cpu_.model->forward(batch, cpu_.cache, lc.data());
    EXPECT_TRUE(rc.ok()) << what << ": cpu: " << (rc.ok() ? "" : rc.error().message);
    auto rg = gpu_.model->forward(batch, gpu_.cache, lg.data());
    EXPECT_TRUE(rg.ok()) << what << ": cuda: " << (rg.ok() ? "" : rg.error().message);
    double max_ref = 0, worst = 0;
    for (float v : lc) max_ref = std::max(max_ref, double(std::fabs(v)));
    const double tol = 0.05 + 0.02 * max_ref;
    size_t agree = 0, nonfinite = 0;
    std::vector<int32_t> greedy(rows);
    for (size_t r = 0; r < rows; ++r) {
      const float* c = lc.data() + r * size_t(vocab_);
      const float* g = lg.data() + r * size_t(vocab_);
      for (int32_t v = 0; v < vocab_; ++v) {
        if (!std::isfinite(g[v])) ++nonfinite;
        worst = std::max(worst, std::fabs(double(g[v]) - double(c[v])) / tol);
      }
      greedy[r] = int32_t(std::max_element(c, c + vocab_) - c);
      agree += greedy[r] == int32_t(std::max_element(g, g + vocab_) - g);
    }
    std::printf("[%s] rows %zu, max|cpu| %.3f, worst err/tol %.4f, greedy agreement %zu/%zu\n",
                what.c_str(), rows, max_ref, worst, agree, rows);
    EXPECT_EQ(nonfinite, 0u) << what;
    EXPECT_LE(worst, 1.0) << what << ": logits differ beyond the BF16 tolerance";
    EXPECT_GE(double(agree), 0.9 * double(rows)) << what;
    return greedy;
  }

  std::vector<int32_t> random_tokens(int32_t n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = 3 + int32_t(rng() % uint32_t(vocab_ - 3));
    return t;
  }

  Side gpu_, cpu_;
  int32_t vocab_ = 0;
  std::vector<int32_t> pool_;
};

TEST_F(ModelCuda, PrefillChunkedPrefillAndDecodeMatchCpu) {
  const int32_t width = 512 / kBlockSize;
  // Step 1: prefill three sequences (17, 40 and 5 tokens; every row's logits
  // for the first) plus the first 25-token chunk of a fourth, 3 padding rows.
  const std::vector<int32_t> lens = {17, 40, 5}, total_len = {17 + 8, 40 + 8, 5 + 8};
  std::vector<std::vector<int32_t>> tables, toks;
  for (size_t s = 0; s < lens.size(); ++s) {
    tables.push_back(take_blocks(total_len[s]));
    toks.push_back(random_tokens(lens[s], uint32_t(s + 1)));
  }
  const std::vector<int32_t> long_prompt = random_tokens(60, 99);
  const std::vector<int32_t> long_table = take_blocks(60 + 8);
  ForwardBatch b;
  b.clear(width);
  for (size_t s = 0; s < lens.size(); ++s) b.add_sequence(toks[s], 0, tables[s], kBlockSize, true, s == 0);
  b.add_sequence(std::span(long_prompt).first(25), 0, long_table, kBlockSize, false);
  b.add_padding(3);
  std::vector<int32_t> next = run_both(b, "prefill");
  // Step 2: the long prompt's second chunk (35 tokens over 25 cached) mixed
  // with one decode token of each of the three sequences.
  std::vector<int32_t> last(lens.size());
  last[0] = next[size_t(lens[0]) - 1];
  for (size_t s = 1; s < lens.size(); ++s) last[s] = next[size_t(lens[0]) + s - 1];
  b.clear(width);
  for (size_t s = 0; s < lens.size(); ++s) b.add_sequence(std::span(&last[s], 1), lens[s], tables[s], kBlockSize);
  b.add_sequence(std::span(long_prompt).subspan(25), 25, long_table, kBlockSize, true, true);
  next = run_both(b, "chunked prefill + decode");
  // Steps 3..8: decode all four, feeding the CPU's greedy tokens to both.
  std::vector<int32_t> ctx = {lens[0] + 1, lens[1] + 1, lens[2] + 1, 60};
  std::vector<int32_t> cur = {next[0], next[1], next[2], next.back()};
  for (int step = 0; step < 6; ++step) {
    b.clear(width);
    for (size_t s = 0; s < 3; ++s) b.add_sequence(std::span(&cur[s], 1), ctx[s], tables[s], kBlockSize);
    b.add_sequence(std::span(&cur[3], 1), ctx[3], long_table, kBlockSize);
    b.add_padding(1);
    cur = run_both(b, "decode " + std::to_string(step));
    for (int32_t& c : ctx) ++c;
  }
}

}  // namespace
}  // namespace pagoda

#else

TEST(ModelCuda, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
