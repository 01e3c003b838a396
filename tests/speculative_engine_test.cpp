// Speculative decoding (n-gram prompt lookup) through the whole engine on
// the real SmolLM2 GGUF (skips without it), in both scheduling modes (the
// _lockstep twin runs it with PAGODA_TEST_SCHEDULING=lockstep):
//  - the transformers greedy goldens, batched and alone, with speculation;
//  - greedy and seeded sampled outputs, token ids and logprobs, are the same
//    with and without speculation, batched and alone;
//  - the proposer does draft and the verifier does accept (the counters);
//  - a KV budget small enough to preempt, with speculating and plain
//    requests mixed, changes nothing and every block comes back;
//  - a stop token and max_tokens inside an accepted run end the output
//    exactly where a run without speculation ends it;
//  - structured-output constraints (JSON schema, choice, regex) and token
//    masks give the same tokens and logprobs with and without speculation
//    (each drafted row masked after the drafts before it), drafts are made
//    and accepted, and drafts the grammar forbids are rejected;
//  - unsupported combinations are refused with a clear error.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"
#include "formats_test_util.hpp"

namespace pagoda::actors {
namespace {

using pagoda::test::expect_blocks_back;
using pagoda::test::expect_same;
using pagoda::test::id_requests;

// Prompts whose continuation copies from the prompt (a repeated random
// pattern: the model's induction heads continue it), and ordinary ones.
std::vector<std::vector<int32_t>> prompts() {
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> out;
  for (int len : {12, 20, 31}) {
    std::vector<int32_t> pattern;
    for (int i = 0; i < len; ++i) pattern.push_back(int32_t(200 + rng() % 15000));
    std::vector<int32_t> p;
    for (int r = 0; r < 3; ++r) p.insert(p.end(), pattern.begin(), pattern.end());
    p.insert(p.end(), pattern.begin(), pattern.begin() + 3);
    out.push_back(std::move(p));
  }
  for (int len : {5, 17}) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back(int32_t(100 + rng() % 20000));
    out.push_back(std::move(p));
  }
  return out;
}

SamplingOptions with_ngram(SamplingOptions s, int32_t k = 4) {
  s.speculative.set = true;
  s.speculative.ngram = true;
  s.speculative.config = NgramConfig{.min_n = 1, .max_n = 3, .k = k};
  return s;
}

SamplingOptions sampled(int32_t max_tokens) {
  SamplingOptions s = pagoda::test::greedy(max_tokens);
  s.temperature = 0.8f;
  s.top_p = 0.95f;
  s.seed = 1234;
  s.logprobs = 2;
  return s;
}

EngineOptions options(const std::string& path) {
  EngineOptions o = pagoda::test::cpu_engine_options(path, model::WeightPrecision::kQuantized, 256, 16, 128);
  o.speculative_max_batch = 64;  // draft in batches too (the server's default is 1)
  return o;
}

// The transformers greedy goldens (exact precision, 32 tokens) with n-gram
// speculation on: batched and each prompt alone (where it drafts most).
TEST(SpeculativeEngine, ReproducesTransformersGreedyGoldens) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const pagoda::test::GreedyGolden g = pagoda::test::load_greedy_golden();
  EngineOptions o = options(path);
  o.precision = model::WeightPrecision::kExact;
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const SamplingOptions s = with_ngram(pagoda::test::greedy(32));
  pagoda::test::expect_greedy_golden((*e)->generate(id_requests(g.ids, s)), g, 0, "batched");
  for (size_t p = 0; p < g.ids.size(); ++p) {  // alone: where it drafts most
    pagoda::test::expect_greedy_golden((*e)->generate(id_requests({g.ids[p]}, s)), g, p, "alone");
  }
  const SpecStats st = (*e)->stats().spec;
  std::printf("goldens: drafted %llu, accepted %llu\n", (unsigned long long)st.ngram.drafted,
              (unsigned long long)st.ngram.accepted);
  EXPECT_GT(st.ngram.accepted, 0u) << "no draft was accepted: the goldens did not exercise verification";
  expect_blocks_back(**e);
}

TEST(SpeculativeEngine, SameTokensAndLogprobsAsWithoutSpeculation) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(options(path));
  ASSERT_TRUE(e.ok()) << e.error().message;
  for (const SamplingOptions& s : {pagoda::test::greedy(40), sampled(40)}) {
    const auto plain = (*e)->generate(id_requests(prompts(), s));
    const auto before = (*e)->stats();
    expect_same((*e)->generate(id_requests(prompts(), with_ngram(s))), plain, "batched");
    const auto after = (*e)->stats();
    std::printf("temperature %.1f: drafted %llu, accepted %llu\n", double(s.temperature),
                (unsigned long long)(after.spec.ngram.drafted - before.spec.ngram.drafted),
                (unsigned long long)(after.spec.ngram.accepted - before.spec.ngram.accepted));
    EXPECT_GT(after.spec.ngram.drafted, before.spec.ngram.drafted) << "nothing was drafted";
    EXPECT_GT(after.spec.ngram.accepted, before.spec.ngram.accepted) << "nothing was accepted";
    EXPECT_EQ(after.spec.draft.drafted, 0u) << "n-gram drafts were counted as draft-model drafts";
    EXPECT_LE(after.spec.ngram.accepted - before.spec.ngram.accepted, after.spec.ngram.drafted - before.spec.ngram.drafted);
    for (size_t i = 0; i < plain.size(); ++i) {  // alone: one speculating sequence per step
      expect_same((*e)->generate(id_requests({prompts()[i]}, with_ngram(s, 6))), {plain[i]}, "alone");
    }
  }
  expect_blocks_back(**e);
}

TEST(SpeculativeEngine, PreemptionAndMixedBatchesChangeNothing) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const SamplingOptions s = sampled(48);
  std::vector<GenerateResult> alone;
  {
    auto e = Engine::start(options(path));
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (const auto& p : prompts()) alone.push_back((*e)->generate(id_requests({p}, s))[0]);
  }
  EngineOptions tiny = options(path);
  tiny.num_blocks = 14;  // 224 slots for 10 requests of up to 96 + 48 tokens
  auto e = Engine::start(tiny);
  ASSERT_TRUE(e.ok()) << e.error().message;
  std::vector<GenerateRequest> mixed = id_requests(prompts(), with_ngram(s));
  auto plain = id_requests(prompts(), s);
  mixed.insert(mixed.end(), plain.begin(), plain.end());
  std::vector<GenerateResult> twice = alone;
  twice.insert(twice.end(), alone.begin(), alone.end());
  expect_same((*e)->generate(std::move(mixed)), twice, "tiny KV budget");
  EXPECT_GT((*e)->stats().preemptions, 0u) << "the budget did not force preemption";
  EXPECT_GT((*e)->stats().spec.ngram.accepted, 0u);
  expect_blocks_back(**e);
}

TEST(SpeculativeEngine, StopsInsideAnAcceptedRunWhereAPlainRunStops) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(options(path));
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto p = prompts()[1];
  const auto full = (*e)->generate(id_requests({p}, pagoda::test::greedy(30)))[0].samples[0].token_ids;
  ASSERT_GE(full.size(), 30u);
  for (int32_t max_tokens : {1, 2, 3, 7, 13}) {
    SamplingOptions s = pagoda::test::greedy(max_tokens);
    const auto want = (*e)->generate(id_requests({p}, s));
    expect_same((*e)->generate(id_requests({p}, with_ngram(s))), want, "max_tokens");
  }
  for (size_t at : {size_t(4), size_t(9), size_t(21)}) {
    SamplingOptions s = pagoda::test::greedy(30);
    s.stop_token_ids = {full[at]};
    const auto want = (*e)->generate(id_requests({p}, s));
    ASSERT_EQ(want[0].samples[0].finish, FinishReason::stop);
    expect_same((*e)->generate(id_requests({p}, with_ngram(s))), want, "stop token");
  }
  expect_blocks_back(**e);
}

GenerateRequest chat_request(const std::string& text, SamplingOptions s) {
  GenerateRequest r;
  r.messages = {{"user", text}};
  r.sampling = std::move(s);
  return r;
}

SamplingOptions constrained(SamplingOptions s, OutputConstraint::Kind kind, std::string spec,
                            std::vector<std::string> choices = {}) {
  s.constraint.kind = kind;
  s.constraint.spec = std::move(spec);
  s.constraint.choices = std::move(choices);
  return s;
}

// Constrained requests whose answers copy from the prompt (drafts accepted)
// or that the grammar keeps from copying it (drafts rejected by the mask).
std::vector<GenerateRequest> structured_requests(const SamplingOptions& base) {
  using K = OutputConstraint::Kind;
  const std::string doc =
      R"({"name": "Ada Lovelace", "born": 1815, "role": "admin", "city": "London", "tags": ["math", "engines"]})";
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string"},"born":{"type":"integer"},)"
      R"("role":{"enum":["admin","user"]},"city":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},)"
      R"("required":["name","born","role","city","tags"]})";
  SamplingOptions masked = base;
  masked.token_mask.bad_words = {"London"};
  return {
      chat_request("Repeat this JSON exactly: " + doc + "\nRepeat it: " + doc,
                   constrained(base, K::json_schema, schema)),
      chat_request("Copy the record " + doc + " as JSON.", constrained(base, K::json_object, "")),
      chat_request("Answer: the the the the the the the the. Is it maybe? yes no maybe",
                   constrained(base, K::choice, "", {"yes", "no", "maybe so"})),
      chat_request("Write the date 2024-01-15 2024-01-15 2024-01-15 again.",
                   constrained(base, K::regex, "[0-9]{4}-[0-9]{2}-[0-9]{2}( [a-z]+)?")),
      chat_request("Repeat: " + doc + " " + doc, constrained(masked, K::json_object, "")),
  };
}

TEST(SpeculativeEngine, StructuredOutputIsTheSameWithSpeculation) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto e = Engine::start(options(path));
  ASSERT_TRUE(e.ok()) << e.error().message;
  for (const SamplingOptions& s : {pagoda::test::greedy(64), sampled(64)}) {
    const auto plain = (*e)->generate(structured_requests(s));
    for (const GenerateResult& r : plain) ASSERT_TRUE(r.error.empty()) << r.error;
    const auto before = (*e)->stats();
    expect_same((*e)->generate(structured_requests(with_ngram(s))), plain, "structured, batched");
    const auto after = (*e)->stats();
    const uint64_t drafted = after.spec.ngram.drafted - before.spec.ngram.drafted;
    const uint64_t accepted = after.spec.ngram.accepted - before.spec.ngram.accepted;
    std::printf("structured, temperature %.1f: drafted %llu, accepted %llu\n", double(s.temperature),
                (unsigned long long)drafted, (unsigned long long)accepted);
    EXPECT_GT(accepted, 0u) << "nothing was accepted";
    EXPECT_LT(accepted, drafted) << "no draft was rejected";
    const auto requests = structured_requests(with_ngram(s, 6));
    for (size_t i = 0; i < requests.size(); ++i) {  // alone: one speculating sequence per step
      expect_same((*e)->generate({requests[i]}), {plain[i]}, "structured, alone");
    }
  }
  expect_blocks_back(**e);
}

TEST(SpeculativeEngine, TheServerDefaultAppliesWhereTheRequestSupportsIt) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  EngineOptions o = options(path);
  o.speculative = with_ngram(SamplingOptions{}).speculative;
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto p = prompts()[0];
  auto drafted = [&](const SamplingOptions& s) {
    const uint64_t before = (*e)->stats().spec.ngram.drafted;
    const auto r = (*e)->generate(id_requests({p}, s));
    EXPECT_TRUE(r[0].error.empty()) << r[0].error;
    return (*e)->stats().spec.ngram.drafted - before;
  };
  EXPECT_GT(drafted(pagoda::test::greedy(16)), 0u) << "unset: the default speculates";
  SamplingOptions off = pagoda::test::greedy(16);
  off.speculative.set = true;  // and ngram false: the request says off
  EXPECT_EQ(drafted(off), 0u);
  SamplingOptions two = pagoda::test::greedy(16);
  two.n = 2;
  EXPECT_EQ(drafted(two), 0u) << "n = 2 runs without speculation, no error";
  SamplingOptions penalised = pagoda::test::greedy(16);
  penalised.repetition_penalty = 1.1f;
  EXPECT_EQ(drafted(penalised), 0u);
  expect_blocks_back(**e);
}

TEST(SpeculativeEngine, RefusesUnsupportedCombinations) {
  SamplingOptions s = with_ngram(pagoda::test::greedy(8));
  s.n = 2;
  EXPECT_FALSE(s.validate().ok());
  s.n = 1;
  s.repetition_penalty = 1.2f;
  EXPECT_FALSE(s.validate().ok());
  s.repetition_penalty = 1.0f;
  s.beam_width = 2;
  EXPECT_FALSE(s.validate().ok());
  s.beam_width = 0;
  s.token_mask.allowed_token_ids = {1, 2, 3};
  EXPECT_TRUE(s.validate().ok()) << "token masks speculate (each drafted row is masked)";
  s.token_mask = {};
  s.constraint.kind = OutputConstraint::Kind::json_object;
  EXPECT_TRUE(s.validate().ok()) << "so do structured-output constraints";
  s.speculative.ngram = false;
  s.speculative.draft = true;  // the draft model proposes without the grammar
  ASSERT_FALSE(s.validate().ok());
  EXPECT_NE(s.validate().error().message.find("structured-output"), std::string::npos);
  s.constraint = {};
  EXPECT_TRUE(s.validate().ok());
  s.speculative.ngram = true;
  s.speculative.draft = false;
  s.speculative.config.k = 0;  // the server's value
  EXPECT_TRUE(s.validate().ok());
  s.speculative.config.k = -1;
  ASSERT_FALSE(s.validate().ok());
  EXPECT_NE(s.validate().error().message.find("num_speculative_tokens"), std::string::npos);
  s.speculative.config.k = 4;
  EXPECT_TRUE(s.validate().ok());
}

}  // namespace
}  // namespace pagoda::actors
