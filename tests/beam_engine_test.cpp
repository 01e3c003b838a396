// Beam search on the real SmolLM2 GGUF through pagoda::Engine (CPU backend;
// skipped without the model):
//  - exact precision against HF transformers' generate(num_beams=k,
//    do_sample=False, length_penalty, early_stopping, num_return_sequences=k)
//    goldens (tests/data/beam/beam_goldens.json, made by
//    tools/gen-beam-goldens.py): identical ids for every returned beam, scores
//    within 1e-2, all cases running concurrently;
//  - quantized precision: the beams are the same alone and under a KV budget
//    that forces preemption; cancels at random points return every block;
//  - option validation (stop strings, width).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <random>
#include <thread>

#include "engine_test_util.hpp"
#include "actors/engine.hpp"
#include "formats_test_util.hpp"

namespace pagoda::actors {
namespace {

using pagoda::test::test_deadline;

struct GoldenBeam {
  std::vector<int32_t> ids;
  double score = 0.0;
};
struct GoldenCase {
  std::vector<int32_t> prompt;
  int32_t k = 0, max_new = 0;
  double length_penalty = 1.0, min_gap = 0.0;
  bool early_stopping = true;
  std::vector<GoldenBeam> beams;
};

std::vector<GoldenCase> load_beam_goldens() {
  std::vector<GoldenCase> out;
  simdjson::dom::parser parser;
  simdjson::dom::element root =
      parser.load(std::string(PAGODA_TEST_DATA_DIR) + "/beam/beam_goldens.json");
  for (simdjson::dom::element c : root["cases"].get_array()) {
    GoldenCase g;
    for (int64_t v : c["prompt_ids"].get_array()) g.prompt.push_back(int32_t(v));
    g.k = int32_t(int64_t(c["num_beams"]));
    g.max_new = int32_t(int64_t(c["max_new_tokens"]));
    g.length_penalty = double(c["length_penalty"]);
    g.early_stopping = bool(c["early_stopping"]);
    simdjson::dom::element gap = c["min_gap"];
    g.min_gap = gap.is_null() ? 1.0 : double(gap);
    for (simdjson::dom::element b : c["beams"].get_array()) {
      GoldenBeam gb;
      for (int64_t v : b["ids"].get_array()) gb.ids.push_back(int32_t(v));
      gb.score = double(b["score"]);
      g.beams.push_back(std::move(gb));
    }
    out.push_back(std::move(g));
  }
  return out;
}

// Collects a request's end and counts its beam updates.
class BeamCollector : public RequestSink {
 public:
  bool on_token(const TokenDelta&) override {
    ++tokens;
    return true;
  }
  void on_beams(const BeamsUpdate& u) override {
    ++updates;
    if (!u.beams.empty()) best_text = u.beams[0].text;
  }
  void on_done(const RequestDone& d) override { promise_.set_value({d, ""}); }
  void on_error(const std::string& m) override { promise_.set_value({{}, m}); }
  std::future<std::pair<RequestDone, std::string>> future() { return promise_.get_future(); }
  std::atomic<int> tokens{0}, updates{0};
  std::string best_text;

 private:
  std::promise<std::pair<RequestDone, std::string>> promise_;
};

GenerateRequest beam_request(const GoldenCase& g) {
  GenerateRequest r;
  r.prompt_ids = g.prompt;
  r.sampling.beam_width = g.k;
  r.sampling.n = g.k;
  r.sampling.length_penalty = float(g.length_penalty);
  r.sampling.early_stopping = g.early_stopping;
  r.sampling.max_tokens = g.max_new;
  r.sampling.seed = 1;
  return r;
}

EngineOptions cpu_options(const std::string& path, model::WeightPrecision p, int32_t blocks) {
  return pagoda::test::cpu_engine_options(path, p, blocks, 32, 256);
}

void wait_blocks_back(Engine& e) { pagoda::test::expect_blocks_back(e); }

// Every golden case, all submitted at once (the beam groups share steps).
TEST(EngineBeams, ReproducesTransformersBeamSearch) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::vector<GoldenCase> cases = load_beam_goldens();
  ASSERT_GE(cases.size(), 4u);
  auto e = Engine::start(cpu_options(path, model::WeightPrecision::kExact, 256));
  ASSERT_TRUE(e.ok()) << e.error().message;
  std::vector<std::shared_ptr<BeamCollector>> sinks;
  std::vector<std::future<std::pair<RequestDone, std::string>>> futures;
  for (const GoldenCase& g : cases) {
    sinks.push_back(std::make_shared<BeamCollector>());
    futures.push_back(sinks.back()->future());
    (*e)->submit(beam_request(g), sinks.back());
  }
  double max_diff = 0.0;
  for (size_t c = 0; c < cases.size(); ++c) {
    auto [done, error] = futures[c].get();
    ASSERT_TRUE(error.empty()) << error;
    const GoldenCase& g = cases[c];
    EXPECT_EQ(sinks[c]->tokens.load(), 0);
    EXPECT_GE(sinks[c]->updates.load(), 1);
    ASSERT_EQ(done.beams.size(), g.beams.size()) << "case " << c;
    ASSERT_EQ(done.finish.size(), g.beams.size());
    for (size_t b = 0; b < g.beams.size(); ++b) {
      EXPECT_EQ(done.beams[b].token_ids, g.beams[b].ids)
          << "case " << c << " beam " << b << " (golden min score gap " << g.min_gap << ")";
      EXPECT_NEAR(done.beams[b].score, g.beams[b].score, 1e-2) << "case " << c << " beam " << b;
      max_diff = std::max(max_diff, std::abs(done.beams[b].score - g.beams[b].score));
      const double len = double(std::max<size_t>(done.beams[b].token_ids.size(), 1));
      EXPECT_NEAR(done.beams[b].score * std::pow(len, g.length_penalty),
                  done.beams[b].cumulative_logprob, 1e-6);
      auto text = (*e)->detokenize(done.beams[b].token_ids);
      ASSERT_TRUE(text.ok());
      EXPECT_EQ(done.finish[b], done.beams[b].finish);
    }
  }
  std::printf("max |score - HF score| over %zu cases: %.3g\n", cases.size(), max_diff);
  // The blocking API returns the beams as samples.
  std::vector<GenerateResult> r = (*e)->generate({beam_request(cases[0])});
  ASSERT_TRUE(r[0].error.empty()) << r[0].error;
  ASSERT_EQ(r[0].samples.size(), cases[0].beams.size());
  for (size_t b = 0; b < r[0].samples.size(); ++b) EXPECT_EQ(r[0].samples[b].token_ids, cases[0].beams[b].ids);
  wait_blocks_back(**e);
}

// Quantized weights (fast): beams are the same alone and under a KV budget
// that forces preemption; cancels at random points return every block.
TEST(EngineBeams, PreemptionKeepsTheBeamsAndCancelReturnsEveryBlock) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::vector<GoldenCase> cases = load_beam_goldens();
  std::vector<std::vector<std::vector<int32_t>>> alone;
  auto beams_of = [](const GenerateResult& r) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    std::vector<std::vector<int32_t>> out;
    for (const SampleResult& s : r.samples) out.push_back(s.token_ids);
    return out;
  };
  std::vector<GenerateRequest> reqs;
  for (const GoldenCase& g : cases) reqs.push_back(beam_request(g));
  {
    auto e = Engine::start(cpu_options(path, model::WeightPrecision::kQuantized, 256));
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (const GenerateRequest& r : reqs) alone.push_back(beams_of((*e)->generate({r})[0]));
  }
  auto e = Engine::start(cpu_options(path, model::WeightPrecision::kQuantized, 12));
  ASSERT_TRUE(e.ok()) << e.error().message;
  std::vector<GenerateResult> together = (*e)->generate(reqs);
  for (size_t c = 0; c < cases.size(); ++c) EXPECT_EQ(beams_of(together[c]), alone[c]) << "case " << c;
  EXPECT_GT((*e)->stats().preemptions, 0u) << "12 blocks did not force preemption";
  wait_blocks_back(**e);
  std::mt19937 rng(3);
  std::vector<std::shared_ptr<BeamCollector>> sinks;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 12; ++i) {
    sinks.push_back(std::make_shared<BeamCollector>());
    handles.push_back((*e)->submit(reqs[size_t(i) % reqs.size()], sinks.back()));
  }
  for (RequestHandle& h : handles) {
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 40));
    if (rng() % 3 != 0) h.cancel();
  }
  for (auto& s : sinks) {
    auto f = s->future();
    ASSERT_EQ(f.wait_for(test_deadline(std::chrono::seconds(60))), std::future_status::ready);
    EXPECT_TRUE(f.get().second.empty());
  }
  wait_blocks_back(**e);
}

TEST(EngineBeams, RejectsStopStringsAndTooWideBeams) {
  SamplingOptions o;
  o.beam_width = 2;
  o.stop = {"x"};
  EXPECT_FALSE(o.validate().ok());
  o.stop.clear();
  EXPECT_TRUE(o.validate().ok());
  o.beam_width = SamplingOptions::kMaxBeamWidth + 1;
  EXPECT_FALSE(o.validate().ok());
  o.beam_width = 2;
  o.n = 3;
  EXPECT_FALSE(o.validate().ok());
}


}  // namespace
}  // namespace pagoda::actors
