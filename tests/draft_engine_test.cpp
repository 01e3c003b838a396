// Draft-model speculative decoding (issue 24 item 1b) through the whole
// engine on the real SmolLM2 GGUF (skips without it), in both scheduling
// modes (the _lockstep twin runs it with PAGODA_TEST_SCHEDULING=lockstep):
//  - the same Q4_1 file as draft and target: every greedy draft is accepted,
//    the output is that of a run without speculation, and both KV pools
//    (the target's and the draft's own) get every block back;
//  - the transformers greedy goldens with the model drafting for itself;
//  - the Q4_1 file drafting for its Q8_0 requantization (made by
//    tools/make-q8-variant.py, which `tools/dev test` runs, or by
//    llama-quantize, into the model cache; skipped with a reason when
//    absent): greedy and seeded sampled outputs
//    are token-identical with and without speculation, batched and alone,
//    under a KV budget that preempts, with cancels;
//  - a draft whose vocabulary differs (a tiny golden model of tests/data)
//    is refused naming both files; a request choosing "draft" on an engine
//    without a draft model is refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"
#include "formats_test_util.hpp"
#include "test_paths.hpp"

namespace pagoda::actors {
namespace {

using pagoda::test::expect_blocks_back;
using pagoda::test::expect_same;
using pagoda::test::id_requests;

std::vector<std::vector<int32_t>> prompts() {
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> out;
  for (int len : {6, 19, 40}) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back(int32_t(100 + rng() % 20000));
    out.push_back(std::move(p));
  }
  std::vector<int32_t> pattern;  // a repeated pattern: long accepted runs
  for (int i = 0; i < 15; ++i) pattern.push_back(int32_t(300 + rng() % 9000));
  std::vector<int32_t> p;
  for (int r = 0; r < 3; ++r) p.insert(p.end(), pattern.begin(), pattern.end());
  out.push_back(std::move(p));
  return out;
}

SamplingOptions with_draft(SamplingOptions s, int32_t k = 4) {
  s.speculative.set = true;
  s.speculative.draft = true;
  s.speculative.config.k = k;
  return s;
}

SamplingOptions sampled(int32_t max_tokens) {
  SamplingOptions s = pagoda::test::greedy(max_tokens);
  s.temperature = 0.9f;
  s.top_p = 0.95f;
  s.seed = 77;
  return s;
}

EngineOptions options(const std::string& target, const std::string& draft, int32_t blocks = 256) {
  EngineOptions o =
      pagoda::test::cpu_engine_options(target, model::WeightPrecision::kQuantized, blocks, 16, 128);
  o.speculative_max_batch = 64;  // draft in batches too (the server's default is 1)
  o.draft_model_path = draft;
  return o;
}

// The default model in Q8_0: llama-quantize's file (tools/make-quant-variants)
// if present, else tools/make-q8-variant.py's (tools/dev test makes it).
std::string q8_variant(const std::string& q4) {
  const auto dir = std::filesystem::path(q4).parent_path() / "variants";
  for (const char* name : {"SmolLM2-135M-Instruct.Q8_0.gguf", "SmolLM2-135M-Instruct.Q4_1-as-Q8_0.gguf"}) {
    if (std::filesystem::exists(dir / name)) return (dir / name).string();
  }
  return {};
}

// Every block of the draft pool back. The executor drops a finished
// sequence's state (mirror row, draft blocks) when the next plan's releases
// reach it and reports the pool after each step: so one plain request runs
// first, as any later traffic would.
void expect_draft_blocks_back(Engine& e) {
  const auto flush = e.generate(id_requests({{1, 2, 3}}, pagoda::test::greedy(1)));
  ASSERT_TRUE(flush[0].error.empty()) << flush[0].error;
  EngineStats s{};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    s = e.stats();
    if (s.draft_kv_blocks_used == 0 && s.running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(s.draft_kv_blocks_total, 0);
  EXPECT_EQ(s.draft_kv_blocks_used, 0) << "draft KV blocks leaked";
}

TEST(DraftEngine, SameFileAsDraftAcceptsEveryGreedyDraft) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(options(path, path));
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto s = pagoda::test::greedy(24);
  const auto plain = (*e)->generate(id_requests(prompts(), s));
  expect_same((*e)->generate(id_requests(prompts(), with_draft(s))), plain, "batched");
  const auto st = (*e)->stats();
  std::printf("same file: drafted %llu, accepted %llu\n", (unsigned long long)st.spec.draft.drafted,
              (unsigned long long)st.spec.draft.accepted);
  EXPECT_GT(st.spec.draft.drafted, 40u);
  EXPECT_EQ(st.spec.draft.accepted, st.spec.draft.drafted) << "the target rejected its own greedy choices";
  EXPECT_EQ(st.spec.ngram.drafted, 0u) << "draft-model drafts were counted as n-gram drafts";
  expect_blocks_back(**e);
  expect_draft_blocks_back(**e);
}

// The transformers greedy goldens (exact precision, 32 tokens) with the
// default model drafting for itself: batched and each prompt alone.
TEST(DraftEngine, ReproducesTransformersGreedyGoldens) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const pagoda::test::GreedyGolden g = pagoda::test::load_greedy_golden();
  EngineOptions o = options(path, path);
  o.precision = model::WeightPrecision::kExact;
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const SamplingOptions s = with_draft(pagoda::test::greedy(32));
  pagoda::test::expect_greedy_golden((*e)->generate(id_requests(g.ids, s)), g, 0, "batched");
  for (size_t p = 0; p < g.ids.size(); ++p) {  // alone: where it drafts most
    pagoda::test::expect_greedy_golden((*e)->generate(id_requests({g.ids[p]}, s)), g, p, "alone");
  }
  EXPECT_GT((*e)->stats().spec.draft.accepted, 0u) << "no draft was accepted";
  expect_blocks_back(**e);
  expect_draft_blocks_back(**e);
}

TEST(DraftEngine, Q4DraftForQ8TargetChangesNoToken) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::string target = q8_variant(path);
  if (target.empty()) {
    GTEST_SKIP() << "no Q8_0 variant: run tools/make-q8-variant.py " << path
                 << " <model dir>/variants/SmolLM2-135M-Instruct.Q4_1-as-Q8_0.gguf (tools/dev test does)";
  }
  auto e = Engine::start(options(target, path));
  ASSERT_TRUE(e.ok()) << e.error().message;
  for (const SamplingOptions& s : {pagoda::test::greedy(32), sampled(32)}) {
    const auto plain = (*e)->generate(id_requests(prompts(), s));
    const auto before = (*e)->stats();
    expect_same((*e)->generate(id_requests(prompts(), with_draft(s))), plain, "batched");
    const auto after = (*e)->stats();
    std::printf("Q4_1 drafting for Q8_0, temperature %.1f: drafted %llu, accepted %llu\n",
                double(s.temperature), (unsigned long long)(after.spec.draft.drafted - before.spec.draft.drafted),
                (unsigned long long)(after.spec.draft.accepted - before.spec.draft.accepted));
    EXPECT_GT(after.spec.draft.accepted - before.spec.draft.accepted, (after.spec.draft.drafted - before.spec.draft.drafted) / 2)
        << "a near-identical draft should be accepted mostly";
    expect_same((*e)->generate(id_requests({prompts()[1]}, with_draft(s, 6))), {plain[1]}, "alone");
  }
  expect_blocks_back(**e);
  expect_draft_blocks_back(**e);
}

TEST(DraftEngine, PreemptionCancelsAndSmallDraftPoolChangeNothing) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const SamplingOptions s = sampled(40);
  std::vector<GenerateResult> alone;
  {
    auto e = Engine::start(options(path, ""));
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (const auto& p : prompts()) alone.push_back((*e)->generate(id_requests({p}, s))[0]);
  }
  EngineOptions tiny = options(path, path, 12);  // 192 slots for 8 requests of up to 45 + 40
  tiny.draft_num_blocks = 9;                     // the draft pool cannot hold every sequence
  auto e = Engine::start(tiny);
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto mixed = id_requests(prompts(), with_draft(s));
  auto plain = id_requests(prompts(), s);
  mixed.insert(mixed.end(), plain.begin(), plain.end());
  auto twice = alone;
  twice.insert(twice.end(), alone.begin(), alone.end());
  expect_same((*e)->generate(std::move(mixed)), twice, "tiny KV budgets");
  EXPECT_GT((*e)->stats().preemptions, 0u) << "the budget did not force preemption";
  EXPECT_GT((*e)->stats().spec.draft.accepted, 0u);
  // Cancels in flight: handles dropped mid-generation.
  struct Sink : RequestSink {
    bool on_token(const TokenDelta&) override { return true; }
    void on_done(const RequestDone&) override {}
    void on_error(const std::string&) override {}
  };
  std::vector<RequestHandle> handles;
  for (auto& r : id_requests(prompts(), with_draft(sampled(200)))) {
    handles.push_back((*e)->submit(std::move(r), std::make_shared<Sink>()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (auto& h : handles) h.cancel();
  expect_blocks_back(**e);
  expect_draft_blocks_back(**e);
}

TEST(DraftEngine, RefusesAnotherVocabularyAndDraftWithoutAModel) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::string tiny = std::string(PAGODA_TEST_DATA_DIR) + "/logits/moe-gguf/tiny-mixtral-f32.gguf";
  auto bad = Engine::start(options(path, tiny));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("different vocabularies"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find(tiny), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find(path), std::string::npos) << bad.error().message;
  auto e = Engine::start(options(path, ""));
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto r = (*e)->generate(id_requests({prompts()[0]}, with_draft(pagoda::test::greedy(4))));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].error.find("draft model"), std::string::npos) << r[0].error;
}

}  // namespace
}  // namespace pagoda::actors
