// Pagoda's quantized forward (--precision quantized, what `pagoda serve`
// runs) against llama.cpp's own evaluation of the same GGUF files:
// tests/data/llamacpp/smollm2-<TYPE>.json, made by tools/gen-llamacpp-goldens.py
// (llama.cpp's greedy continuation of the 8 prompts of logits/smollm2.json and
// its top-5 log-probabilities at each of 32 positions). Never builds llama.cpp.
//
// Teacher-forced: all prompts are prefilled in one batch, then every step
// feeds llama.cpp's greedy token, so one flip does not derail what follows.
// Run for the quantized path and for the exact one (dequantized weights, fp32
// activations: what the HF goldens of llama_fidelity_test check), per position:
//  - greedy: our argmax equals llama.cpp's token, unless llama.cpp's own
//    top-1 minus top-2 log-probability is below kTieMargin (a near-tie);
//  - log-probabilities: |ours - llama.cpp's| over llama.cpp's top-5 tokens
//    at all 256 positions: mean, 99th percentile and max under the bounds.
// Why these bounds (measured 2026-12-03, CPU with AVX-512 VNNI, both Pagoda
// CPU routes, PAGODA_CPU_PACKED=1/0): the two engines round differently
// (llama.cpp quantizes activations to Q8_1/Q8_K blocks and keeps an f16 KV
// cache; Pagoda's quantized path uses its own int8 activations, its exact
// path none), and the gap is llama.cpp's as much as ours: our exact path is
// as far from llama.cpp as our quantized one, and Q8_0 (near-lossless weights)
// shows the same gap. Same file, quantized (exact):
//   Q4_1   mean 0.094-0.101 (0.099), p99 0.41-0.43 (0.54), max 0.74-0.86 (1.18)
//   Q8_0   mean 0.098-0.102 (0.098), p99 0.44-0.51 (0.51), max 0.73-0.93 (0.97)
//   Q4_K_M mean 0.145-0.151 (0.132), p99 0.73-0.75 (0.64), max 1.27-1.33 (1.60)
//   Q6_K   mean 0.133      (0.115), p99 0.59      (0.52), max 0.88-0.93 (0.81)
//   Q3_K_M mean 0.145-0.155 (0.131), p99 0.73-0.77 (0.62), max 1.64-2.51 (1.41)
//   IQ4_XS mean 0.125-0.129 (0.116), p99 0.51-0.57 (0.51), max 1.00-1.20 (1.33)
//   greedy agreement 244-252/256, flips only where llama.cpp's margin <= 0.63.
//   PAGODA_CPU_ISA=avx2 gives the same figures as avx512vnni; scalar: Q4_1
//   mean 0.095 max 0.69, Q4_K_M mean 0.147 max 2.11 (quantized path).
// Another file's golden (Pagoda on file A, llama.cpp on file B), i.e.
// weights off by one 3-4-bit quantization step: Q6_K/Q3_K_M, Q6_K/Q4_K_M,
// Q4_1/Q4_K_M, Q4_K_M/Q3_K_M, IQ4_XS/Q4_K_M give mean 0.36-0.83, p99
// 1.65-3.86, max 3.0-9.4, flips at margins 1.5-3.5: all fail. The bounds sit
// between: mean 0.25, p99 1.2, max 3.0, tie margin 1.0 nats. Not resolved:
// differences below a 6-8-bit step (all variants are requantized from Q4_1):
// Q8_0's golden on the Q6_K file passes (mean 0.18); on Q4_1 it fails only
// by one flip (margin 1.47).
//
// The default model (Q4_1) is found like the other real-model tests
// (PAGODA_MODEL or tools/fetch-model's path); the variants by file name in
// PAGODA_QUANT_VARIANTS (':'-separated, tools/make-quant-variants) or in
// ~/.cache/pagoda/models/variants. A file that is absent, or whose size
// differs from the golden's, skips with the reason.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "formats_test_util.hpp"
#include "llama_test_util.hpp"

namespace pagoda {
namespace {

using model::LlamaModel;
using model::WeightPrecision;

constexpr int32_t kMaxLen = 128;
constexpr double kTieMargin = 1.0;         // llama.cpp top-1 minus top-2 logprob (nats)
constexpr double kMaxLogprobDiff = 3.0;    // nats, any of llama.cpp's top-5, any position
constexpr double kP99LogprobDiff = 1.2;    // nats, 99th percentile of those
constexpr double kMeanLogprobDiff = 0.25;  // nats, mean over all positions and top-5

struct Entry {
  int32_t id;
  double logprob;
};

struct LlamaCppGolden {
  std::string model;
  int64_t model_bytes = 0;
  std::vector<std::vector<int32_t>> ids, greedy;
  std::vector<std::vector<std::vector<Entry>>> top;  // [prompt][step][rank]
};

LlamaCppGolden load_golden(const std::string& type) {
  LlamaCppGolden g;
  simdjson::dom::parser parser;
  simdjson::dom::element root =
      parser.load(std::string(PAGODA_TEST_DATA_DIR) + "/llamacpp/smollm2-" + type + ".json");
  g.model = std::string(std::string_view(root["model"]));
  g.model_bytes = int64_t(root["model_bytes"]);
  for (simdjson::dom::element p : root["prompts"].get_array()) {
    std::vector<int32_t> ids, greedy;
    for (int64_t v : p["ids"].get_array()) ids.push_back(int32_t(v));
    for (int64_t v : p["greedy"].get_array()) greedy.push_back(int32_t(v));
    std::vector<std::vector<Entry>> steps;
    for (simdjson::dom::element step : p["top"].get_array()) {
      std::vector<Entry> row;
      for (simdjson::dom::element e : step.get_array()) {
        row.push_back({int32_t(int64_t(e.at(0))), double(e.at(1))});
      }
      steps.push_back(std::move(row));
    }
    g.ids.push_back(std::move(ids));
    g.greedy.push_back(std::move(greedy));
    g.top.push_back(std::move(steps));
  }
  return g;
}

// The golden's model file on this machine, or "" (why in *reason).
std::string find_model(const LlamaCppGolden& g, std::string* reason) {
  std::vector<std::string> candidates;
  if (std::string real = test::real_model_path(); !real.empty()) candidates.push_back(real);
  const char* env = std::getenv("PAGODA_QUANT_VARIANTS");
  std::stringstream ss(env ? env : "");
  for (std::string p; std::getline(ss, p, ':');) candidates.push_back(p);
  const char* home = std::getenv("HOME");
  candidates.push_back(std::string(home ? home : "") + "/.cache/pagoda/models/variants/" + g.model);
  for (const std::string& p : candidates) {
    if (std::filesystem::path(p).filename() != g.model || !std::filesystem::exists(p)) continue;
    if (int64_t(std::filesystem::file_size(p)) != g.model_bytes) {
      *reason = p + " is not the file of the golden (size differs)";
      return "";
    }
    return p;
  }
  *reason = g.model + " absent (default model: PAGODA_MODEL or tools/fetch-model; variants: "
                      "PAGODA_QUANT_VARIANTS or tools/make-quant-variants)";
  return "";
}

// Teacher-forced run; returns our log-softmax rows [prompt][step] -> [vocab].
std::vector<std::vector<std::vector<float>>> run_forced(LlamaModel& m, gpu::KvCache& cache,
                                                        const LlamaCppGolden& g) {
  const int32_t S = int32_t(g.ids.size()), V = m.config().vocab_size;
  const int32_t bs = m.options().block_size, bps = kMaxLen / bs;
  std::vector<std::vector<int32_t>> tables;
  for (int32_t i = 0; i < S; ++i) tables.push_back(test::sequential_blocks(kMaxLen, bs, i * bps));
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(S));
  std::vector<float> logits(size_t(S) * size_t(V));  // [S, vocab]
  model::ForwardBatch b;
  b.clear(bps);
  for (int32_t i = 0; i < S; ++i) b.add_sequence(g.ids[size_t(i)], 0, tables[size_t(i)], bs);
  for (size_t step = 0; step < g.greedy[0].size(); ++step) {
    auto r = m.forward(b, cache, logits.data());
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) break;
    b.clear(bps);
    for (int32_t i = 0; i < S; ++i) {
      const float* row = logits.data() + size_t(i) * size_t(V);  // [vocab]
      const double mx = *std::max_element(row, row + V);
      double sum = 0;
      for (int32_t j = 0; j < V; ++j) sum += std::exp(double(row[j]) - mx);
      const double lse = mx + std::log(sum);
      std::vector<float> lp(static_cast<size_t>(V));
      for (int32_t j = 0; j < V; ++j) lp[size_t(j)] = float(double(row[j]) - lse);
      out[size_t(i)].push_back(std::move(lp));
      const int32_t& next = g.greedy[size_t(i)][step];
      const int32_t pos = int32_t(g.ids[size_t(i)].size() + step);
      b.add_sequence(std::span<const int32_t>(&next, 1), pos, tables[size_t(i)], bs);
    }
  }
  return out;
}

// One run's comparison with llama.cpp (and with a second run of ours).
struct Stats {
  size_t positions = 0, agree = 0;
  double max_flip_margin = 0, max_diff = 0, mean_diff = 0, p99_diff = 0;
  double max_vs_other = 0;  // max |dlogprob| against `other` on llama.cpp's top-5
};

Stats compare(const LlamaCppGolden& g, const std::vector<std::vector<std::vector<float>>>& ours,
              const std::vector<std::vector<std::vector<float>>>& other) {
  Stats s;
  std::vector<double> diffs;
  for (size_t p = 0; p < g.ids.size(); ++p) {
    for (size_t t = 0; t < g.greedy[p].size(); ++t) {
      const std::vector<float>& lp = ours[p][t];  // [vocab]
      const std::vector<Entry>& top = g.top[p][t];
      ++s.positions;
      const int32_t mine = test::argmax(lp.data(), int32_t(lp.size()));
      const double margin = top[0].logprob - top[1].logprob;
      if (mine == g.greedy[p][t]) {
        ++s.agree;
      } else {
        s.max_flip_margin = std::max(s.max_flip_margin, margin);
        EXPECT_LT(margin, kTieMargin)
            << "prompt " << p << " step " << t << ": ours " << mine << ", llama.cpp "
            << g.greedy[p][t] << " (llama.cpp margin " << margin << ")";
      }
      for (const Entry& e : top) {
        diffs.push_back(std::fabs(double(lp[size_t(e.id)]) - e.logprob));
        s.max_vs_other = std::max(
            s.max_vs_other, std::fabs(double(lp[size_t(e.id)]) - other[p][t][size_t(e.id)]));
      }
    }
  }
  std::sort(diffs.begin(), diffs.end());
  for (double d : diffs) s.mean_diff += d / double(diffs.size());
  s.max_diff = diffs.back();
  s.p99_diff = diffs[diffs.size() * 99 / 100];
  return s;
}

std::vector<std::vector<std::vector<float>>> run_precision(const std::string& path,
                                                           const LlamaCppGolden& g,
                                                           WeightPrecision prec) {
  auto backend = test::cpu_backend();
  auto m = test::load_small_batch_model(path, *backend, prec, kMaxLen);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return {};
  auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 8 * kMaxLen / 16);
  EXPECT_TRUE(cache.ok());
  if (!cache.ok()) return {};
  return run_forced(**m, *cache, g);
}

class LlamaCppFidelity : public ::testing::TestWithParam<const char*> {};

// The quantized path, and beside it the exact path (dequantized weights, fp32
// activations), which shows how much of the gap is Pagoda's activation
// quantization and how much llama.cpp's own rounding; both must pass.
TEST_P(LlamaCppFidelity, TeacherForcedGreedyAndTopLogprobs) {
  const LlamaCppGolden g = load_golden(GetParam());
  std::string reason;
  const std::string path = find_model(g, &reason);
  if (path.empty()) GTEST_SKIP() << reason;
  const auto quantized = run_precision(path, g, WeightPrecision::kQuantized);
  const auto exact = run_precision(path, g, WeightPrecision::kExact);
  ASSERT_EQ(quantized.size(), g.ids.size());
  ASSERT_EQ(exact.size(), g.ids.size());
  for (size_t p = 0; p < g.ids.size(); ++p) {
    ASSERT_EQ(quantized[p].size(), g.greedy[p].size());
    ASSERT_EQ(exact[p].size(), g.greedy[p].size());
  }
  const Stats q = compare(g, quantized, exact);
  std::printf("[%s quantized] greedy agreement %zu/%zu (largest llama.cpp margin at a flip %.3f),"
              " top-5 |dlogprob| mean %.4f p99 %.4f max %.4f; vs our exact path max %.4f\n",
              g.model.c_str(), q.agree, q.positions, q.max_flip_margin, q.mean_diff, q.p99_diff,
              q.max_diff, q.max_vs_other);
  const Stats e = compare(g, exact, quantized);
    std::printf("[%s exact]     greedy agreement %zu/%zu (largest llama.cpp margin at a flip %.3f),"
                " top-5 |dlogprob| mean %.4f p99 %.4f max %.4f\n",
                g.model.c_str(), e.agree, e.positions, e.max_flip_margin, e.mean_diff, e.p99_diff,
                e.max_diff);
  for (const Stats* s : {&q, &e}) {
    EXPECT_LE(s->max_diff, kMaxLogprobDiff);
    EXPECT_LE(s->p99_diff, kP99LogprobDiff);
    EXPECT_LE(s->mean_diff, kMeanLogprobDiff);
  }
}

INSTANTIATE_TEST_SUITE_P(SmolLM2, LlamaCppFidelity,
                         ::testing::Values("Q4_1", "Q8_0", "Q4_K_M", "Q6_K", "Q3_K_M", "IQ4_XS"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace pagoda
