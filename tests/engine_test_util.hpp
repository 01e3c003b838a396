// Helpers shared by the engine suites on the real model (engine_test,
// engine_faults_test, beam_engine_test, the speculative suites): a small CPU
// engine's options, the transformers greedy goldens, greedy sampling
// options, requests from token ids and the wait until every block is back.
// Header-only.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "actors/engine.hpp"
#include "llama_test_util.hpp"
#include "scheduling_mode.hpp"
#include "test_deadline.hpp"

namespace pagoda::test {

// The CPU backend, 16-token blocks, max_model_len 512, scheduling ahead
// unless PAGODA_TEST_SCHEDULING=lockstep; one step ahead, the executor also
// prepares ahead (the CUDA default, off by default on the CPU), so the
// suites run both executor paths.
inline actors::EngineOptions cpu_engine_options(const std::string& path, model::WeightPrecision p,
                                                int32_t blocks, int32_t max_seqs, int32_t max_tokens) {
  actors::EngineOptions o;
  o.model_path = path;
  o.backend = gpu::BackendKind::kCpu;
  o.precision = p;
  o.num_blocks = blocks;
  o.block_size = 16;
  o.max_num_seqs = max_seqs;
  o.max_num_batched_tokens = max_tokens;
  o.max_model_len = 512;
  o.async_scheduling = async_scheduling_under_test();
  o.prepare_ahead = o.async_scheduling;
  return o;
}

// Greedy, ignore_eos, seed 1.
inline actors::SamplingOptions greedy(int32_t max_tokens) {
  actors::SamplingOptions s;
  s.temperature = 0.0f;
  s.max_tokens = max_tokens;
  s.ignore_eos = true;
  s.seed = 1;
  return s;
}

// One request per prompt (token ids), all with options s.
inline std::vector<actors::GenerateRequest> id_requests(const std::vector<std::vector<int32_t>>& prompts,
                                                        const actors::SamplingOptions& s) {
  std::vector<actors::GenerateRequest> out;
  for (const auto& p : prompts) {
    actors::GenerateRequest r;
    r.prompt_ids = p;
    r.sampling = s;
    out.push_back(std::move(r));
  }
  return out;
}

// Each result (first sample) is the golden's greedy continuation of prompt
// first + i.
inline void expect_greedy_golden(const std::vector<actors::GenerateResult>& res, const GreedyGolden& g,
                                 size_t first, const char* what) {
  for (size_t i = 0; i < res.size(); ++i) {
    ASSERT_TRUE(res[i].error.empty()) << res[i].error;
    EXPECT_EQ(res[i].samples[0].token_ids, g.greedy.at(first + i)) << what << " prompt " << first + i;
  }
}

// Waits (up to test_deadline(6 s): the engine settles cancels asynchronously) until no
// request runs or waits and no block is used; then checks it.
inline void expect_blocks_back(actors::Engine& e) {
  actors::EngineStats s{};
  const auto until = std::chrono::steady_clock::now() + test_deadline(std::chrono::seconds(6));
  while (std::chrono::steady_clock::now() < until) {
    s = e.stats();
    if (s.running == 0 && s.waiting == 0 && s.kv_blocks_used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_free + s.kv_blocks_cached, s.kv_blocks_total);
}

// The same tokens, finish and logprobs (within 1e-4), request by request
// (first sample of each): speculation and scheduling modes must not change them.
inline void expect_same(const std::vector<actors::GenerateResult>& got,
                        const std::vector<actors::GenerateResult>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].error.empty()) << got[i].error;
    ASSERT_TRUE(want[i].error.empty()) << want[i].error;
    EXPECT_EQ(got[i].samples[0].token_ids, want[i].samples[0].token_ids) << what << " prompt " << i;
    EXPECT_EQ(got[i].samples[0].finish, want[i].samples[0].finish) << what << " prompt " << i;
    const auto& a = got[i].samples[0].logprobs;
    const auto& b = want[i].samples[0].logprobs;
    ASSERT_EQ(a.size(), b.size()) << what << " prompt " << i;
    for (size_t t = 0; t < a.size(); ++t) EXPECT_NEAR(a[t], b[t], 1e-4) << what << " token " << t;
  }
}

}  // namespace pagoda::test
