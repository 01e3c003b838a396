// Pagoda's quantized forward (--precision quantized, what `pagoda serve`
// runs) against llama.cpp's own evaluation of the same GGUF files:
// tests/data/llamacpp/smollm2-<TYPE>.json, made by tools/gen-llamacpp-goldens.py
// (llama.cpp's greedy continuation of the 8 prompts of logits/smollm2.json and
// its top-5 log-probabilities at each of 32 positions). Never builds llama.cpp.
//
// Teacher-forced (tests/llamacpp_golden.hpp), for the quantized path and for
// the exact one (dequantized weights, fp32 activations: what the HF goldens of
// llama_fidelity_test check), per position:
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

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "formats_test_util.hpp"
#include "llamacpp_golden.hpp"

namespace pagoda {
namespace {

using model::WeightPrecision;
using test::LlamaCppGolden;

constexpr int32_t kMaxLen = 128;
constexpr double kTieMargin = 1.0;         // llama.cpp top-1 minus top-2 logprob (nats)
constexpr double kMaxLogprobDiff = 3.0;    // nats, any of llama.cpp's top-5, any position
constexpr double kP99LogprobDiff = 1.2;    // nats, 99th percentile of those
constexpr double kMeanLogprobDiff = 0.25;  // nats, mean over all positions and top-5

LlamaCppGolden load_golden(const std::string& type) {
  return test::load_llamacpp_golden(std::string(PAGODA_TEST_DATA_DIR) + "/llamacpp/smollm2-" + type +
                                    ".json");
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

class LlamaCppFidelity : public ::testing::TestWithParam<const char*> {};

// The quantized path, and beside it the exact path (dequantized weights, fp32
// activations), which shows how much of the gap is Pagoda's activation
// quantization and how much llama.cpp's own rounding; both must pass.
TEST_P(LlamaCppFidelity, TeacherForcedGreedyAndTopLogprobs) {
  const LlamaCppGolden g = load_golden(GetParam());
  std::string reason;
  const std::string path = find_model(g, &reason);
  if (path.empty()) GTEST_SKIP() << reason;
  const auto quantized = test::run_llamacpp_golden(path, g, WeightPrecision::kQuantized, kMaxLen);
  const auto exact = test::run_llamacpp_golden(path, g, WeightPrecision::kExact, kMaxLen);
  if (HasFailure()) return;
  const test::LlamaCppStats q = test::compare_with_llamacpp(g, quantized, exact, kTieMargin);
  test::print_llamacpp_stats(g.model + " quantized", q);
  const test::LlamaCppStats e = test::compare_with_llamacpp(g, exact, quantized, kTieMargin);
  test::print_llamacpp_stats(g.model + " exact", e);
  for (const test::LlamaCppStats* s : {&q, &e}) {
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
