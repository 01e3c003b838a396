// Scheduling one step ahead (async_scheduling, the default; each step booked
// when the one in flight reports progress, or as soon as it is sent with
// --book-at-send; the executor preparing each step while the one before runs,
// or not: --prepare-ahead on|off) against lockstep (--no-async-scheduling)
// through pagoda::Engine on the real SmolLM2 GGUF
// (CPU backend, quantized; skips without the model). One mixed load runs in
// each mode, all requests at once on a KV pool so small that sequences are
// preempted and recomputed:
//  - greedy prompts, one long enough to be chunked;
//  - parallel sampling (n = 3, seeded, temperature 0.8, top_p 0.9);
//  - a stop string (cut from a greedy run's text, so that it matches);
//  - beam search (width 3, 2 returned);
//  - two requests the consumer cancels after a fixed number of tokens.
// Every request's tokens (per sample; per beam with its finish reason) must
// be identical between the modes, the modes must have preempted, and every
// block must come back, the cancelled requests' included.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <random>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"
#include "formats_test_util.hpp"

namespace pagoda::actors {
namespace {

using pagoda::test::greedy;
using pagoda::test::test_deadline;

// What one request produced: token ids per sample index, finish reasons,
// beams. cancel_after > 0: refuses (cancels) the token after that many.
struct Outcome {
  std::vector<std::vector<int32_t>> ids;
  std::vector<FinishReason> finish;
  std::vector<std::pair<std::vector<int32_t>, FinishReason>> beams;
  std::string error;
  bool cancelled = false;
  bool operator==(const Outcome&) const = default;
};

class RecordingSink : public RequestSink {
 public:
  explicit RecordingSink(int32_t cancel_after) : cancel_after_(cancel_after) {}
  bool on_token(const TokenDelta& d) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (d.token_id < 0) return true;
    if (cancel_after_ > 0 && received_ == cancel_after_) {
      out_.cancelled = true;
      end();
      return false;
    }
    ++received_;
    if (size_t(d.index) >= out_.ids.size()) out_.ids.resize(size_t(d.index) + 1);
    out_.ids[size_t(d.index)].push_back(d.token_id);
    return true;
  }
  void on_done(const RequestDone& done) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.finish = done.finish;
    for (const BeamHypothesis& b : done.beams) out_.beams.emplace_back(b.token_ids, b.finish);
    end();
  }
  void on_error(const std::string& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.error = message;
    end();
  }
  // Waits for the stream's end (or the consumer's cancel); false on timeout.
  bool wait() { return ended_.get_future().wait_for(test_deadline(std::chrono::seconds(240))) ==
                       std::future_status::ready; }
  Outcome outcome() {
    std::lock_guard<std::mutex> lock(mu_);
    return out_;
  }

 private:
  void end() {
    if (!ended_flag_) ended_.set_value();
    ended_flag_ = true;
  }
  std::mutex mu_;
  int32_t cancel_after_;
  int32_t received_ = 0;
  Outcome out_;
  bool ended_flag_ = false;
  std::promise<void> ended_;
};

struct Case {
  GenerateRequest request;
  int32_t cancel_after = 0;
};

std::vector<int32_t> random_prompt(std::mt19937& rng, int len) {
  std::vector<int32_t> p;
  for (int k = 0; k < len; ++k) p.push_back(int32_t(100 + rng() % 20000));
  return p;
}

GenerateRequest ids_request(std::vector<int32_t> prompt, SamplingOptions s) {
  GenerateRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling = std::move(s);
  return r;
}

// The mixed load; `stop` is a stop string that the greedy reply to
// stop_prompt contains.
std::vector<Case> mixed_load(const std::vector<int32_t>& stop_prompt, const std::string& stop) {
  std::mt19937 rng(23);
  std::vector<Case> out;
  for (int len : {9, 30, 150}) out.push_back({ids_request(random_prompt(rng, len), greedy(24))});
  for (uint64_t seed : {7u, 8u}) {
    SamplingOptions s = greedy(20);
    s.temperature = 0.8f;
    s.top_p = 0.9f;
    s.n = 3;
    s.seed = seed;
    out.push_back({ids_request(random_prompt(rng, 20), s)});
  }
  SamplingOptions stopping = greedy(24);
  stopping.stop = {stop};
  out.push_back({ids_request(stop_prompt, stopping)});
  SamplingOptions beam = greedy(12);
  beam.beam_width = 3;
  beam.n = 2;
  out.push_back({ids_request(random_prompt(rng, 25), beam)});
  out.push_back({ids_request(random_prompt(rng, 40), greedy(30)), 5});
  out.push_back({ids_request(random_prompt(rng, 12), greedy(30)), 9});
  return out;
}

// at_send: one step ahead, each step booked as soon as the one before is
// sent (--book-at-send) rather than when it reports progress (the default).
// prepare_ahead false: each step whole on the executor actor's thread.
EngineOptions mode_options(const std::string& path, bool async, bool at_send = false,
                           bool prepare_ahead = true) {
  // 28 blocks of 16 tokens: far fewer than the load's sequences need at once.
  EngineOptions o = pagoda::test::cpu_engine_options(path, model::WeightPrecision::kQuantized, 28, 16, 64);
  o.async_scheduling = async;
  o.book_on_progress = !at_send;
  o.prepare_ahead = prepare_ahead;
  return o;
}

struct ModeRun {
  std::vector<Outcome> outcomes;
  EngineStats stats;
};

ModeRun run_mode(const std::string& path, bool async, const std::vector<Case>& load,
                 bool at_send = false, bool prepare_ahead = true) {
  ModeRun run;
  auto e = Engine::start(mode_options(path, async, at_send, prepare_ahead));
  EXPECT_TRUE(e.ok()) << e.error().message;
  if (!e.ok()) return run;
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (const Case& c : load) {
    sinks.push_back(std::make_shared<RecordingSink>(c.cancel_after));
    (*e)->submit(c.request, sinks.back());
  }
  for (auto& s : sinks) {
    EXPECT_TRUE(s->wait()) << "a request did not finish";
    run.outcomes.push_back(s->outcome());
  }
  pagoda::test::expect_blocks_back(**e);
  run.stats = (*e)->stats();
  return run;
}

// A stop string inside the greedy reply to `prompt` (its middle 3 chars).
std::string stop_inside_reply(const std::string& path, const std::vector<int32_t>& prompt) {
  auto e = Engine::start(mode_options(path, false));
  if (!e.ok()) return "";
  GenerateResult r = (*e)->generate({ids_request(prompt, greedy(24))})[0];
  const std::string& text = r.samples.at(0).text;
  return text.size() < 8 ? "" : text.substr(text.size() / 2, 3);
}

TEST(EngineModeParity, MixedLoadGivesTheSameTokensOneStepAheadAndInLockstep) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  std::mt19937 rng(3);
  const std::vector<int32_t> stop_prompt = random_prompt(rng, 15);
  const std::string stop = stop_inside_reply(path, stop_prompt);
  ASSERT_FALSE(stop.empty()) << "the greedy reply is too short to cut a stop string from";
  const std::vector<Case> load = mixed_load(stop_prompt, stop);
  const ModeRun ahead = run_mode(path, true, load);
  const ModeRun lockstep = run_mode(path, false, load);
  const ModeRun at_send = run_mode(path, true, load, /*at_send=*/true);
  const ModeRun whole = run_mode(path, true, load, false, /*prepare_ahead=*/false);
  ASSERT_EQ(ahead.outcomes.size(), load.size());
  ASSERT_EQ(whole.outcomes.size(), load.size());
  EXPECT_GT(ahead.stats.steps_prepared_ahead, 0u) << "no step was prepared while the one before ran";
  EXPECT_EQ(whole.stats.steps_prepared_ahead, 0u);
  ASSERT_EQ(lockstep.outcomes.size(), load.size());
  ASSERT_EQ(at_send.outcomes.size(), load.size());
  EXPECT_GT(ahead.stats.preemptions, 0u) << "the KV pool should force preemption";
  EXPECT_GT(lockstep.stats.preemptions, 0u) << "the KV pool should force preemption";
  for (size_t i = 0; i < load.size(); ++i) {
    const Outcome& a = ahead.outcomes[i];
    EXPECT_TRUE(a.error.empty()) << "request " << i << ": " << a.error;
    EXPECT_EQ(a.cancelled, load[i].cancel_after > 0) << "request " << i;
    EXPECT_TRUE(a == lockstep.outcomes[i]) << "request " << i << " differs between the modes";
    EXPECT_TRUE(a == at_send.outcomes[i]) << "request " << i << " differs when booked at send";
    EXPECT_TRUE(a == whole.outcomes[i]) << "request " << i << " differs without prepare-ahead";
  }
  EXPECT_EQ(ahead.outcomes[5].finish, std::vector<FinishReason>{FinishReason::stop});
  EXPECT_EQ(ahead.outcomes[6].beams.size(), 2u);
  EXPECT_EQ(ahead.outcomes[7].ids.at(0).size(), 5u);
  EXPECT_EQ(ahead.outcomes[3].ids.size(), 3u);
}

}  // namespace
}  // namespace pagoda::actors
