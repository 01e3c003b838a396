// The scheduling policies through pagoda::Engine on the real SmolLM2 GGUF
// (skips without it): with `fair` a light client's request is admitted
// before a flooding client's queued ones (fcfs, the control, admits it last);
// with `priority` a lower value runs first and preempts a running larger
// value, whose greedy output is still that of a lone run.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"
#include "formats_test_util.hpp"

namespace pagoda::actors {
namespace {

using Clock = std::chrono::steady_clock;
using pagoda::test::greedy;
using pagoda::test::test_deadline;

// The time of the first token and of the end; the token ids.
class TimingSink : public RequestSink {
 public:
  bool on_token(const TokenDelta& d) override {
    std::lock_guard<std::mutex> lock(mu);
    if (d.token_id >= 0) {
      if (!first) first = Clock::now();
      ids.push_back(d.token_id);
    }
    return true;
  }
  void on_done(const RequestDone&) override { end(true); }
  void on_error(const std::string&) override { end(false); }
  bool started() {
    std::lock_guard<std::mutex> lock(mu);
    return first.has_value();
  }
  void end(bool ok) {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = Clock::now();
    }
    done.set_value(ok);
  }
  std::mutex mu;
  std::optional<Clock::time_point> first, finished;
  std::vector<int32_t> ids;
  std::promise<bool> done;
};

EngineOptions options(const std::string& path, SchedulingPolicy policy, int32_t max_seqs) {
  EngineOptions o = pagoda::test::cpu_engine_options(path, model::WeightPrecision::kQuantized, 256, max_seqs, 128);
  o.scheduling_policy = policy;
  return o;
}

std::shared_ptr<TimingSink> submit(Engine& e, const std::string& prompt, int32_t max_tokens,
                                   const std::string& client, int32_t priority = 0) {
  GenerateRequest r;
  r.prompt = prompt;
  r.sampling = greedy(max_tokens);
  r.sampling.client = client;
  r.sampling.priority = priority;
  auto sink = std::make_shared<TimingSink>();
  e.submit(std::move(r), sink);
  return sink;
}

void wait_until(const std::function<bool()>& ready) {
  const auto until = Clock::now() + test_deadline(std::chrono::seconds(60));
  while (!ready() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(ready()) << "timed out";
}

// Flood requests (8, two run at a time) whose first token came before the
// light client's.
int flood_ahead_of_light(const std::string& path, SchedulingPolicy policy) {
  auto e = Engine::start(options(path, policy, 2));
  EXPECT_TRUE(e.ok()) << e.error().message;
  if (!e.ok()) return -1;
  std::vector<std::shared_ptr<TimingSink>> flood;
  for (int i = 0; i < 8; ++i) flood.push_back(submit(**e, "Flood number " + std::to_string(i), 24, "flood"));
  wait_until([&] { return std::count_if(flood.begin(), flood.end(), [](auto& s) { return s->started(); }) >= 2; });
  auto light = submit(**e, "A light request", 4, "light");
  EXPECT_TRUE(light->done.get_future().get());
  for (auto& s : flood) EXPECT_TRUE(s->done.get_future().get());
  int ahead = 0;
  for (auto& s : flood) ahead += *s->first < *light->first;
  pagoda::test::expect_blocks_back(**e);
  return ahead;
}

TEST(EngineScheduling, FairAdmitsALightClientBeforeAFloodsQueuedRequests) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  // fair: the two running, at most one more admitted in the same step as it.
  EXPECT_LE(flood_ahead_of_light(path, SchedulingPolicy::fair), 3);
  // fcfs: every flood request first.
  EXPECT_EQ(flood_ahead_of_light(path, SchedulingPolicy::fcfs), 8);
}

TEST(EngineScheduling, PriorityRunsTheLowerValueFirstAndPreempts) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::string low_prompt = "Write a long story about a lighthouse keeper";
  std::vector<int32_t> alone;
  {
    auto e = Engine::start(options(path, SchedulingPolicy::priority, 1));
    ASSERT_TRUE(e.ok()) << e.error().message;
    auto s = submit(**e, low_prompt, 48, "a", 5);
    ASSERT_TRUE(s->done.get_future().get());
    alone = s->ids;
  }
  auto e = Engine::start(options(path, SchedulingPolicy::priority, 1));
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto low = submit(**e, low_prompt, 48, "a", 5);
  wait_until([&] { return low->started(); });
  auto mid = submit(**e, "Second", 8, "b", 3);
  auto urgent = submit(**e, "First", 8, "c", 1);
  ASSERT_TRUE(urgent->done.get_future().get());
  ASSERT_TRUE(mid->done.get_future().get());
  ASSERT_TRUE(low->done.get_future().get());
  EXPECT_LT(*urgent->finished, *mid->finished);
  EXPECT_LT(*mid->finished, *low->finished);
  EXPECT_GE((*e)->stats().preemptions, 1u) << "one sequence slot: the running value 5 had to make room";
  EXPECT_EQ(low->ids, alone) << "the preempted request recomputes to its lone output";
  pagoda::test::expect_blocks_back(**e);
}

}  // namespace
}  // namespace pagoda::actors
