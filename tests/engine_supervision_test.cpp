// The engine's supervision, on the real model (CPU, quantized): the
// executor dies, the block manager dies, the executor hangs past the
// timeout, a step throws, one row's logits are not finite or its sampled id
// is outside the vocabulary. Each time the requests in flight (or only the
// failing row's request) end with an error, the lost actor is replaced,
// /health's state returns to serving, the next request gets the same greedy
// tokens as before the fault, every KV block returns to the pool, and
// shutdown never waits out a dead or hung actor. Runs in both scheduling
// modes (ctest registers the _lockstep variant).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"
#include "fault_test_util.hpp"
#include "formats_test_util.hpp"
#include "row_fault_backend.hpp"

namespace pagoda::actors {
namespace {

using pagoda::test::expect_blocks_back;
using pagoda::test::greedy;
using pagoda::test::test_deadline;
using Clock = std::chrono::steady_clock;

EngineOptions options(const std::string& path) { return pagoda::test::fault_options(path); }

using pagoda::test::alone;
using pagoda::test::EndSink;
using pagoda::test::ids_request;

std::vector<int32_t> prompt(int32_t len, int32_t salt) { return pagoda::test::id_prompt(len, salt); }

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// After a fault: serving again, the same greedy tokens as before, every
// block back, and a shutdown that returns at once.
void expect_recovered(Engine& e, const std::vector<int32_t>& p, const std::vector<int32_t>& ref) {
  EXPECT_EQ(alone(e, p, int32_t(ref.size())), ref);
  expect_blocks_back(e);
  EXPECT_EQ(e.health().state, EngineState::serving) << e.health().detail;
  const auto t0 = Clock::now();
  e.shutdown();
  EXPECT_LT(seconds_since(t0), 5.0 * pagoda::test::deadline_scale());
}

// The executor actor dies on the victim's 2nd plan (a crash: no answer).
// Before supervision the victim waited for the 300 s step timeout and every
// later plan went to the dead actor; now the victim ends at once with an
// error and a new executor serves the next request.
TEST(EngineSupervision, AnExecutorThatDiesIsReplaced) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  EngineOptions o = options(path);
  auto seen = std::make_shared<std::atomic<uint64_t>>(0);
  auto die_at = std::make_shared<std::atomic<uint64_t>>(0);
  o.fault_injector = [seen, die_at](uint64_t nth) {
    seen->store(nth);
    StepFault f;
    f.die = nth == die_at->load();
    return f;
  };
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const std::vector<int32_t> later = prompt(30, 2);
  const std::vector<int32_t> ref = alone(**e, later, 12);
  die_at->store(seen->load() + 2);
  auto victim = std::make_shared<EndSink>();
  const auto t0 = Clock::now();
  (*e)->submit(ids_request(prompt(25, 3), 40), victim);
  ASSERT_TRUE(victim->wait(test_deadline(std::chrono::seconds(60))));
  EXPECT_LT(seconds_since(t0), 30.0 * pagoda::test::deadline_scale());  // not the 300 s timeout
  EXPECT_EQ(victim->finish(), FinishReason::error);
  EXPECT_LT(victim->tokens().size(), 40u);
  EXPECT_EQ((*e)->health().executor_restarts, 1u);
  EXPECT_EQ((*e)->health().block_manager_restarts, 0u);
  expect_recovered(**e, later, ref);
}

// The block-manager actor dies in a booking of the victim (its 3rd). The
// steps in flight then end with an error (one step ahead: the victim's
// step in flight); a group not in flight (lockstep: nothing is in flight
// during a booking) is recomputed on the fresh pool and finishes with its
// lone tokens.
TEST(EngineSupervision, ABlockManagerThatDiesIsReplaced) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  EngineOptions o = options(path);
  auto seen = std::make_shared<std::atomic<uint64_t>>(0);
  auto die_at = std::make_shared<std::atomic<uint64_t>>(0);
  o.booking_fault_injector = [seen, die_at](uint64_t nth) {
    seen->store(nth);
    return nth == die_at->load();
  };
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const std::vector<int32_t> later = prompt(30, 2), victim_prompt = prompt(25, 4);
  const std::vector<int32_t> ref = alone(**e, later, 12);
  const std::vector<int32_t> victim_ref = alone(**e, victim_prompt, 20);
  expect_blocks_back(**e);
  die_at->store(seen->load() + 3);
  auto victim = std::make_shared<EndSink>();
  (*e)->submit(ids_request(victim_prompt, 20), victim);
  ASSERT_TRUE(victim->wait(test_deadline(std::chrono::seconds(60))));
  if (o.async_scheduling) {
    EXPECT_EQ(victim->finish(), FinishReason::error);
  } else {
    EXPECT_EQ(victim->finish(), FinishReason::length);
    EXPECT_EQ(victim->tokens(), victim_ref);
  }
  EXPECT_EQ((*e)->health().block_manager_restarts, 1u);
  EXPECT_EQ((*e)->health().executor_restarts, 0u);
  expect_recovered(**e, later, ref);
}

// The executor hangs 6 s in the victim's 2nd plan with a 1 s timeout: the
// victim ends in about the timeout, a new executor serves the next request
// while the old one still hangs, and shutdown returns without waiting for
// it (before: the next request's plans queued behind the hang, and
// shutdown waited for it).
TEST(EngineSupervision, AHungExecutorIsReplacedAndShutdownDoesNotWaitForIt) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  EngineOptions o = options(path);
  const double scale = pagoda::test::deadline_scale();
  o.step_timeout_s = 1.0 * scale;
  auto seen = std::make_shared<std::atomic<uint64_t>>(0);
  auto hang_at = std::make_shared<std::atomic<uint64_t>>(0);
  const double hang_s = 6.0 * scale;
  o.fault_injector = [seen, hang_at, hang_s](uint64_t nth) {
    seen->store(nth);
    StepFault f;
    f.delay_s = nth == hang_at->load() ? hang_s : 0.0;
    return f;
  };
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const std::vector<int32_t> later = prompt(30, 2);
  const std::vector<int32_t> ref = alone(**e, later, 12);
  hang_at->store(seen->load() + 2);
  auto victim = std::make_shared<EndSink>();
  const auto t0 = Clock::now();
  (*e)->submit(ids_request(prompt(25, 5), 40), victim);
  ASSERT_TRUE(victim->wait(test_deadline(std::chrono::seconds(60))));
  EXPECT_LT(seconds_since(t0), 0.5 * hang_s);  // the timeout, not the hang
  EXPECT_EQ(victim->finish(), FinishReason::error);
  EXPECT_GE((*e)->stats().timed_out_steps, 1u);
  EXPECT_EQ((*e)->health().executor_restarts, 1u);
  EXPECT_EQ(alone(**e, later, 12), ref);  // the new executor, the old one still hangs
  EXPECT_LT(seconds_since(t0), hang_s);
  expect_blocks_back(**e);
  const auto t1 = Clock::now();
  (*e)->shutdown();
  EXPECT_LT(seconds_since(t1), 0.5 * hang_s);
  EXPECT_LT(seconds_since(t0), hang_s);  // shutdown did not wait for the hung step
  // Let the abandoned executor return (its thread then ends the actor system).
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(int64_t(1000 * hang_s) + 1500));
}

// An exception inside a step (after the executor took the plan's deltas):
// the victim ends with an error, the step planned on top of it is skipped
// (its groups recomputed), and the engine serves on with the same tokens.
TEST(EngineSupervision, AnExceptionInAStepEndsOnlyItsGroups) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  EngineOptions o = options(path);
  auto seen = std::make_shared<std::atomic<uint64_t>>(0);
  auto throw_at = std::make_shared<std::atomic<uint64_t>>(0);
  o.fault_injector = [seen, throw_at](uint64_t nth) {
    seen->store(nth);
    StepFault f;
    f.throw_in_step = nth == throw_at->load();
    return f;
  };
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const std::vector<int32_t> later = prompt(30, 2);
  const std::vector<int32_t> ref = alone(**e, later, 12);
  throw_at->store(seen->load() + 3);
  auto victim = std::make_shared<EndSink>();
  (*e)->submit(ids_request(prompt(25, 6), 40), victim);
  ASSERT_TRUE(victim->wait(test_deadline(std::chrono::seconds(60))));
  EXPECT_EQ(victim->finish(), FinishReason::error);
  EXPECT_EQ((*e)->stats().failed_steps, 1u);
  EXPECT_EQ((*e)->health().executor_restarts, 0u);
  expect_recovered(**e, later, ref);
}

// One row damaged in the first sample call that has two rows (two requests
// decoding together): NaN logits, or an id outside the vocabulary. Exactly
// one request ends with an error; the other finishes with its lone tokens.
void one_bad_row(bool nan) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::vector<int32_t> pa = prompt(20, 7), pb = prompt(22, 8);
  std::vector<int32_t> ref_a, ref_b;
  {
    auto clean = Engine::start(options(path));
    ASSERT_TRUE(clean.ok()) << clean.error().message;
    ref_a = alone(**clean, pa, 16);
    ref_b = alone(**clean, pb, 16);
  }
  EngineOptions o = options(path);
  auto armed = std::make_shared<std::atomic<bool>>(true);
  o.wrap_backend = [armed, nan](std::unique_ptr<gpu::Backend> inner) -> std::unique_ptr<gpu::Backend> {
    return std::make_unique<gpu::test::RowFaultBackend>(std::move(inner), [armed, nan](uint64_t, int32_t rows) {
      gpu::test::RowFault f;
      if (rows >= 2 && armed->exchange(false)) f.row = 1, f.nan_logits = nan;
      return f;
    });
  };
  auto e = Engine::start(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto a = std::make_shared<EndSink>(), b = std::make_shared<EndSink>();
  (*e)->submit(ids_request(pa, 16), a);
  (*e)->submit(ids_request(pb, 16), b);
  ASSERT_TRUE(a->wait(test_deadline(std::chrono::seconds(60))));
  ASSERT_TRUE(b->wait(test_deadline(std::chrono::seconds(60))));
  EXPECT_FALSE(armed->load());  // the fault was injected
  const bool a_failed = a->finish() == FinishReason::error, b_failed = b->finish() == FinishReason::error;
  EXPECT_NE(a_failed, b_failed);  // exactly one
  if (!a_failed) {
    EXPECT_EQ(a->tokens(), ref_a);
  }
  if (!b_failed) {
    EXPECT_EQ(b->tokens(), ref_b);
  }
  EXPECT_EQ((*e)->stats().failed_steps, 0u);  // no step failed, one row did
  expect_recovered(**e, pa, ref_a);
}

TEST(EngineSupervision, ARowWithNonFiniteLogitsEndsOnlyItsRequest) { one_bad_row(true); }
TEST(EngineSupervision, ARowWithAnIdOutsideTheVocabularyEndsOnlyItsRequest) { one_bad_row(false); }

}  // namespace
}  // namespace pagoda::actors
