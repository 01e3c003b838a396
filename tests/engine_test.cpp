// pagoda::Engine end to end on the real SmolLM2 GGUF (skips without it):
//  - the HF transformers greedy goldens (tests/data/logits/smollm2.json,
//    exact precision, ignore_eos, 32 tokens) reproduced through the engine
//    with all prompts batched together;
//  - batch independence (exact and quantized precision): each request's
//    greedy output is the same alone, among 32 other concurrent requests,
//    under a KV budget so small that requests are preempted and recomputed,
//    and on prefix-cache hits;
//  - parallel sampling: sample i of an n = 3 group equals a lone request
//    seeded with seed_for(i) (fork + copy-on-write on the real cache);
//  - the contiguous KV layout (baseline) gives the same greedy ids and runs
//    at most total_blocks / blocks_per_seq sequences at once;
//  - statistics: TTFT / ITL histogram counts and token totals;
//  - stop strings, cancel under load (every block returns), and shutdown
//    with requests in flight finishing within a timeout.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "engine_test_util.hpp"
#include "actors/engine.hpp"
#include "actors/request_actor.hpp"
#include "formats_test_util.hpp"

namespace pagoda::actors {
namespace {

using pagoda::test::test_deadline;

using pagoda::test::expect_blocks_back;

using Golden = pagoda::test::GreedyGolden;
using pagoda::test::load_greedy_golden;

EngineOptions base_options(const std::string& path, model::WeightPrecision p) {
  return pagoda::test::cpu_engine_options(path, p, 256, 16, 128);
}

using pagoda::test::greedy;

using pagoda::test::id_requests;

// The stop-string holdback on its own (no model needed).
TEST(ReleaseText, HoldsBackPossibleStopPrefixesAndCutsAtTheEarliestMatch) {
  const std::vector<std::string> stops = {"END", "\n\n"};
  bool matched = false;
  std::string held = "hello E";
  EXPECT_EQ(release_text(held, stops, &matched), "hello ");
  EXPECT_FALSE(matched);
  EXPECT_EQ(held, "E");
  held += "Xtra\n";
  EXPECT_EQ(release_text(held, stops, &matched), "EXtra");
  EXPECT_EQ(held, "\n");
  held += "\nmore END";
  EXPECT_EQ(release_text(held, stops, &matched), "");
  EXPECT_TRUE(matched);
  EXPECT_TRUE(held.empty());
  held = "a END b \n\n";
  EXPECT_EQ(release_text(held, stops, &matched), "a ");
  EXPECT_TRUE(matched);
  held = "no stop here";
  EXPECT_EQ(release_text(held, {}, &matched), "no stop here");
  EXPECT_FALSE(matched);
}

// Bucket i holds (bounds[i-1], bounds[i]]; the last one is +Inf.
TEST(LatencyHistogram, PutsObservationsInTheirBucket) {
  LatencyHistogram h;
  for (double v : {0.0005, 0.001, 0.003, 0.75, 61.0}) h.observe(v);
  EXPECT_EQ(h.count, 5u);
  EXPECT_DOUBLE_EQ(h.sum, 0.0005 + 0.001 + 0.003 + 0.75 + 61.0);
  std::array<uint64_t, 17> want{};
  want[0] = 2;   // <= 0.001
  want[2] = 1;   // (0.0025, 0.005]
  want[9] = 1;   // (0.5, 1]
  want[16] = 1;  // +Inf
  EXPECT_EQ(h.counts, want);
}

TEST(Engine, ReproducesTransformersGreedyGoldens) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  Golden g = load_greedy_golden();
  auto engine = Engine::start(base_options(path, model::WeightPrecision::kExact));
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  std::vector<GenerateResult> res = (*engine)->generate(id_requests(g.ids, greedy(32)));
  ASSERT_EQ(res.size(), g.ids.size());
  for (size_t p = 0; p < res.size(); ++p) {
    ASSERT_TRUE(res[p].error.empty()) << res[p].error;
    EXPECT_EQ(res[p].samples[0].token_ids, g.greedy[p]) << "prompt " << p;
    EXPECT_EQ(res[p].samples[0].finish, FinishReason::length);
  }
  expect_blocks_back(**engine);
}

// 33 prompts (each request runs among 32 others): the goldens, 4 long enough
// to be chunked, and short random ones up to 33. Two random prompts share a
// 40-token prefix, so the first batched round already hits the prefix cache.
std::vector<std::vector<int32_t>> mixed_prompts(const Golden& g) {
  std::vector<std::vector<int32_t>> out = g.ids;
  std::mt19937 rng(11);
  auto random_prompt = [&rng](int len) {
    std::vector<int32_t> p;
    for (int k = 0; k < len; ++k) p.push_back(int32_t(100 + rng() % 20000));
    return p;
  };
  for (int i = 0; i < 4; ++i) out.push_back(random_prompt(40 + i * 45));
  std::vector<int32_t> shared = random_prompt(40);
  while (out.size() < 33) {
    std::vector<int32_t> p = random_prompt(3 + int(rng() % 30));
    if (out.size() % 8 == 0) p.insert(p.begin(), shared.begin(), shared.end());
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<GenerateResult>& res) {
  std::vector<std::vector<int32_t>> out;
  for (const GenerateResult& r : res) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    out.push_back(r.samples.empty() ? std::vector<int32_t>{} : r.samples[0].token_ids);
  }
  return out;
}

void expect_batch_independent(const std::string& path, model::WeightPrecision precision) {
  const auto prompts = mixed_prompts(load_greedy_golden());
  const SamplingOptions s = greedy(20);
  std::vector<std::vector<int32_t>> alone;
  {
    EngineOptions wide = base_options(path, precision);
    wide.max_num_seqs = 40;  // all 33 in one batch
    auto e = Engine::start(wide);
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (const auto& p : prompts) alone.push_back(tokens_of((*e)->generate(id_requests({p}, s)))[0]);
    // Batched, then the same again: the second round hits the prefix cache.
    EXPECT_EQ(tokens_of((*e)->generate(id_requests(prompts, s))), alone) << "batched";
    EXPECT_GE((*e)->stats().peak_running_seqs, 33) << "the 33 requests did not run together";
    const uint64_t hits_before = (*e)->stats().prefix_hit_tokens;
    EXPECT_EQ(tokens_of((*e)->generate(id_requests(prompts, s))), alone) << "prefix cached";
    EXPECT_GT((*e)->stats().prefix_hit_tokens, hits_before);
    expect_blocks_back(**e);
  }
  EngineOptions tiny = base_options(path, precision);
  tiny.num_blocks = 20;  // 320 slots for 33 requests of up to 195 + 20 tokens
  tiny.enable_prefix_caching = false;
  auto e = Engine::start(tiny);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(tokens_of((*e)->generate(id_requests(prompts, s))), alone) << "tiny KV budget";
  EXPECT_GT((*e)->stats().preemptions, 0u) << "the budget did not force preemption";
  expect_blocks_back(**e);
}

// Exact precision: every layer is batch-independent (attention never split,
// OpenBLAS F32 GEMMs), so greedy ids must match exactly.
TEST(Engine, GreedyOutputIsTheSameAloneBatchedPreemptedAndCached) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  expect_batch_independent(path, model::WeightPrecision::kExact);
}

// Quantized precision too: the int8 kernels compute each output the same way
// whatever the batch (it once did not: a contracted FMA in some kernel
// instantiations only; see gpu/cpu/quant_matmul_avx2.cpp).
TEST(Engine, QuantizedGreedyOutputIsBatchIndependent) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  expect_batch_independent(path, model::WeightPrecision::kQuantized);
}

TEST(Engine, ParallelSamplesEqualLoneRequestsWithTheirSeeds) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  SamplingOptions s;
  s.temperature = 0.9f;
  s.top_p = 0.95f;
  s.max_tokens = 16;
  s.ignore_eos = true;
  s.seed = 1234;
  s.n = 3;
  GenerateRequest r;
  r.prompt = "Once upon a time, in a small village by the sea,";
  r.sampling = s;
  GenerateResult group = (*e)->generate({r})[0];
  ASSERT_TRUE(group.error.empty()) << group.error;
  ASSERT_EQ(group.samples.size(), 3u);
  EXPECT_NE(group.samples[0].token_ids, group.samples[1].token_ids);
  for (int32_t i = 0; i < 3; ++i) {
    GenerateRequest lone = r;
    lone.sampling.n = 1;
    lone.sampling.seed = s.seed_for(i);
    GenerateResult one = (*e)->generate({lone})[0];
    EXPECT_EQ(group.samples[size_t(i)].token_ids, one.samples[0].token_ids) << "sample " << i;
    EXPECT_EQ(group.samples[size_t(i)].text, one.samples[0].text) << "sample " << i;
  }
  expect_blocks_back(**e);
}

TEST(Engine, StopStringCutsTheTextAndFinishes) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  SamplingOptions s = greedy(24);
  GenerateResult full = (*e)->generate({"The capital of France is"}, s)[0];
  const std::string text = full.samples[0].text;
  ASSERT_GT(text.size(), 12u) << text;
  const std::string stop = text.substr(text.size() / 2, 3);
  s.stop = {stop};
  GenerateResult cut = (*e)->generate({"The capital of France is"}, s)[0];
  EXPECT_EQ(cut.samples[0].text, text.substr(0, text.find(stop)));
  EXPECT_EQ(cut.samples[0].finish, FinishReason::stop);
  EXPECT_LT(cut.samples[0].token_ids.size(), full.samples[0].token_ids.size());
  expect_blocks_back(**e);
}

// min_tokens masks EOS from sampling (vLLM's semantics): a chat reply that
// ends early by itself goes on past its EOS, identical up to that point.
TEST(Engine, MinTokensMasksEosUntilReached) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  GenerateRequest r;
  r.messages = {{"user", "Say hi."}};
  r.sampling = greedy(48);
  r.sampling.ignore_eos = false;
  const SampleResult free_run = (*e)->generate({r})[0].samples.at(0);
  ASSERT_EQ(free_run.finish, FinishReason::stop) << "the reply should end by itself";
  const size_t ended = free_run.token_ids.size();  // EOS included
  ASSERT_LT(ended, 30u) << "the reply should end before min_tokens";
  r.sampling.min_tokens = 30;
  const SampleResult held = (*e)->generate({r})[0].samples.at(0);
  ASSERT_GE(held.token_ids.size(), 30u);
  const int32_t eos = free_run.token_ids.back();
  for (size_t i = 0; i < 29; ++i) EXPECT_NE(held.token_ids[i], eos) << "token " << i;
  EXPECT_TRUE(std::equal(free_run.token_ids.begin(), free_run.token_ids.end() - 1, held.token_ids.begin()))
      << "identical up to where the free run stopped";
  expect_blocks_back(**e);
}

// Keeps every delta (top candidates included).
class DeltaSink : public RequestSink {
 public:
  bool on_token(const TokenDelta& d) override {
    deltas.push_back(d);
    return true;
  }
  void on_done(const RequestDone&) override { done.set_value(true); }
  void on_error(const std::string&) override { done.set_value(false); }
  std::vector<TokenDelta> deltas;
  std::promise<bool> done;
};

TEST(Engine, GreedyTokensAreTheTopCandidateWithItsLogprob) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  GenerateRequest r;
  r.prompt = "The capital of France is";
  r.sampling = greedy(8);
  r.sampling.logprobs = 5;
  auto sink = std::make_shared<DeltaSink>();
  auto done = sink->done.get_future();
  (*e)->submit(std::move(r), sink);
  ASSERT_TRUE(done.get());
  int tokens = 0;
  for (const TokenDelta& d : sink->deltas) {
    if (d.token_id < 0) continue;
    ++tokens;
    ASSERT_EQ(d.top_tokens.size(), 5u);
    EXPECT_EQ(d.top_tokens[0], d.token_id);
    EXPECT_FLOAT_EQ(d.top_logprobs[0], d.logprob);
    EXPECT_LE(d.logprob, 0.0f);
    for (size_t k = 1; k < 5; ++k) EXPECT_LE(d.top_logprobs[k], d.top_logprobs[k - 1]);
  }
  EXPECT_EQ(tokens, 8);
}

// Counts stream ends; a request may be cancelled at any point.
class CountingSink : public RequestSink {
 public:
  explicit CountingSink(std::atomic<int>* ended) : ended_(ended) {}
  bool on_token(const TokenDelta&) override { return true; }
  void on_done(const RequestDone&) override { ++*ended_; }
  void on_error(const std::string&) override { ++*ended_; }

 private:
  std::atomic<int>* ended_;
};

TEST(Engine, CancelAtRandomPointsUnderLoadReturnsEveryBlock) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  EngineOptions o = base_options(path, model::WeightPrecision::kQuantized);
  o.num_blocks = 40;
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto prompts = mixed_prompts(load_greedy_golden());
  std::atomic<int> ended{0};
  std::vector<RequestHandle> handles;
  std::mt19937 rng(5);
  for (const auto& p : prompts) {
    GenerateRequest r;
    r.prompt_ids = p;
    r.sampling = greedy(40);
    r.sampling.n = 1 + int32_t(rng() % 2);
    handles.push_back((*e)->submit(std::move(r), std::make_shared<CountingSink>(&ended)));
  }
  for (RequestHandle& h : handles) {
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 60));
    if (rng() % 4 != 0) h.cancel();
  }
  for (int i = 0; i < 3000 && ended.load() < int(handles.size()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ended.load(), int(handles.size()));
  expect_blocks_back(**e);
}

TEST(Engine, ShutsDownWithRequestsInFlight) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto ended = std::make_shared<std::atomic<int>>(0);
  const auto prompts = mixed_prompts(load_greedy_golden());
  for (const auto& p : prompts) {
    GenerateRequest r;
    r.prompt_ids = p;
    r.sampling = greedy(200);
    (*e)->submit(std::move(r), std::make_shared<CountingSink>(ended.get()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // ~Engine on another thread than start()'s; a watchdog ends the process if it hangs.
  std::unique_ptr<Engine> engine = std::move(e).value();
  auto done = std::async(std::launch::async, [&engine] { engine.reset(); });
  if (done.wait_for(test_deadline(std::chrono::seconds(60))) != std::future_status::ready) {
    std::fprintf(stderr, "FAIL: ~Engine did not return within 60 s\n");
    std::_Exit(1);
  }
  EXPECT_EQ(ended->load(), int(prompts.size())) << "every stream gets on_done or on_error";
}

TEST(Engine, SubmitAfterShutdownFailsThroughTheSink) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  (*e)->shutdown();
  (*e)->shutdown();  // idempotent
  auto sink = std::make_shared<DeltaSink>();
  GenerateRequest r;
  r.prompt = "Hello";
  r.sampling = greedy(4);
  (*e)->submit(r, sink);
  auto done = sink->done.get_future();
  ASSERT_EQ(done.wait_for(test_deadline(std::chrono::seconds(10))), std::future_status::ready);
  EXPECT_FALSE(done.get()) << "on_error, not on_done";
}

TEST(Engine, ReportsBadRequestsThroughTheSink) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  SamplingOptions bad = greedy(4);
  bad.top_p = 0.0f;
  EXPECT_FALSE((*e)->generate({"hi"}, bad)[0].error.empty());
  GenerateRequest big;
  big.prompt_ids.assign(600, 42);  // longer than max_model_len
  big.sampling = greedy(4);
  EXPECT_FALSE((*e)->generate({big})[0].error.empty());
  expect_blocks_back(**e);
}

TEST(Engine, ContiguousLayoutMatchesPagedAndBoundsConcurrency) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const Golden g = load_greedy_golden();  // 8 prompts of 5..17 tokens
  EngineOptions o = base_options(path, model::WeightPrecision::kQuantized);
  o.num_blocks = 40;   // watermark floor(0.4) = 0 blocks
  o.max_model_len = 128;  // contiguous: 128 / 16 = 8 blocks per sequence -> 5 at once
  std::vector<std::vector<int32_t>> paged_ids;
  {
    auto e = Engine::start(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    paged_ids = tokens_of((*e)->generate(id_requests(g.ids, greedy(20))));
    EXPECT_EQ((*e)->stats().peak_running_seqs, 8) << "paged: all 8 fit at once";
  }
  o.kv_layout = KvLayout::contiguous;
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(tokens_of((*e)->generate(id_requests(g.ids, greedy(20)))), paged_ids);
  const EngineStats s = (*e)->stats();
  EXPECT_LE(s.peak_running_seqs, 40 / 8);
  EXPECT_GE(s.peak_running_seqs, 2);
  EXPECT_EQ(s.peak_kv_blocks_used % 8, 0) << "whole reservations only";
  EXPECT_LE(s.peak_kv_blocks_used, 40);
  expect_blocks_back(**e);
}

TEST(Engine, StatsCountLatenciesAndTokens) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const Golden g = load_greedy_golden();
  auto e = Engine::start(base_options(path, model::WeightPrecision::kQuantized));
  ASSERT_TRUE(e.ok()) << e.error().message;
  const uint64_t n = g.ids.size(), max_tokens = 7;
  (void)tokens_of((*e)->generate(id_requests(g.ids, greedy(int32_t(max_tokens)))));
  const EngineStats s = (*e)->stats();
  uint64_t prompt_tokens = 0;
  for (const auto& p : g.ids) prompt_tokens += p.size();
  EXPECT_EQ(s.prompt_tokens, prompt_tokens);
  EXPECT_EQ(s.generation_tokens, n * max_tokens);
  EXPECT_EQ(s.ttft.count, n);
  EXPECT_EQ(s.itl.count, n * max_tokens - n);
  // Each request admitted once; its queue time ends before its first token.
  EXPECT_EQ(s.queue.count, n);
  EXPECT_LT(s.queue.sum, s.ttft.sum);
  for (const LatencyHistogram* h : {&s.ttft, &s.itl, &s.queue}) {
    uint64_t in_buckets = 0;
    for (uint64_t c : h->counts) in_buckets += c;
    EXPECT_EQ(in_buckets, h->count);
    EXPECT_GT(h->sum, 0.0);
  }
  EXPECT_GT(s.kv_utilisation_samples, 0u);
  EXPECT_GT(s.kv_utilisation_mean, 0.0);
  EXPECT_LE(s.kv_utilisation_mean, 1.0);
}

}  // namespace
}  // namespace pagoda::actors
