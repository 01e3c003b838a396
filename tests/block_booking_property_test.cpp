// Property test of the scheduler <-> block-manager protocol: a SchedulerCore
// with its block manager behind a separate BlockBooker (as the actors are),
// driven by random messages: new groups (n > 1, beams), cancels, stop-string
// finishes, bookings, and step results that arrive late (up to two steps in
// flight), fail, or are skipped because they depended on a failed step. The
// executor is a fake that keeps tables from the plans' deltas (a wrong delta
// is an error there). After EVERY message the pool's invariants hold; when
// everything has ended, free + cached == total, no sequence is left in the
// booker or in the executor's mirror, and no step log is left behind.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "actors/block_booking.hpp"
#include "actors/scheduler_core.hpp"
#include "fake_kv_cache.hpp"

namespace pagoda::actors {
namespace {

constexpr TokenId kEos = 0;

struct Rig {
  SchedulerCore core;
  BlockBooker booker;
  test::FakeKvCache kv;
  std::deque<StepPlan> in_flight;
  std::vector<uint64_t> failed;  // steps the fake executor failed or skipped
  std::mt19937 rng;
  RequestId next_id = 1;
  std::vector<RequestId> live;

  Rig(int32_t blocks, int32_t bs, KvLayout layout, uint32_t seed)
      : core(config()), booker(manager(blocks, bs, layout)), kv(blocks, bs), rng(seed) {}

  static SchedulerConfig config() {
    SchedulerConfig c;
    c.max_num_seqs = 12;
    c.max_num_batched_tokens = 48;
    c.max_model_len = 96;
    c.eos_token_ids = {kEos};
    c.max_in_flight = 2;
    return c;
  }
  static BlockManager manager(int32_t blocks, int32_t bs, KvLayout layout) {
    BlockManagerConfig bc;
    bc.num_blocks = blocks;
    bc.block_size = bs;
    bc.layout = layout;
    bc.max_model_len = 96;
    return BlockManager::create(bc).value();
  }

  void check(const char* after) {
    auto inv = booker.manager().check_invariants();
    ASSERT_TRUE(inv.ok()) << after << ": " << inv.error().message;
  }

  void drop_events() {
    for (const SeqEvent& e : core.take_events()) {
      if (e.group_done) std::erase(live, e.request);
    }
  }

  void add() {
    SamplingOptions o;
    o.seed = rng();
    o.max_tokens = 4 + int32_t(rng() % 24);
    o.temperature = 1.0f;
    const uint32_t kind = rng() % 6;
    if (kind == 0) {
      o.beam_width = 2 + int32_t(rng() % 2);
      o.n = o.beam_width;
      o.temperature = 0.0f;
    } else if (kind == 1) {
      o.n = 2 + int32_t(rng() % 3);
    }
    std::vector<TokenId> p(size_t(3 + rng() % 40));
    const TokenId base = TokenId(1 + rng() % 3);  // shared prefixes: prefix-cache hits
    for (size_t i = 0; i < p.size(); ++i) p[i] = i < 16 ? base : TokenId(1 + rng() % 50);
    ASSERT_TRUE(core.add_group(next_id, p, o).ok());
    live.push_back(next_id++);
  }

  void book() {
    if (!core.can_prepare()) return;
    StepPlan plan = core.commit(booker.book(core.prepare()));
    check("booking");
    if (!plan.empty()) in_flight.push_back(std::move(plan));
  }

  bool is_failed(uint64_t step) const {
    return std::find(failed.begin(), failed.end(), step) != failed.end();
  }

  // The oldest plan runs (or fails, or is skipped) and its answer arrives.
  void answer(bool fail) {
    if (in_flight.empty()) return;
    StepPlan plan = std::move(in_flight.front());
    in_flight.pop_front();
    if (plan.depends_on != 0 && is_failed(plan.depends_on)) {
      kv.release_only(plan);
      failed.push_back(plan.step_id);
      core.skipped_step(plan.step_id);
    } else if (fail) {
      kv.release_only(plan);
      failed.push_back(plan.step_id);
      core.fail_step(plan.step_id, "injected");
    } else {
      kv.write(plan);
      StepResult r;
      r.step_id = plan.step_id;
      for (const PlanSample& s : plan.samples) {
        SampleOutput o;
        o.seq = s.seq;
        o.token = TokenId(rng() % 50);
        for (int32_t k = 0; k < s.params.num_top_logprobs; ++k) {
          o.top_tokens.push_back(TokenId((o.token + k) % 50));
          o.top_logprobs.push_back(-0.1f * float(k + 1));
        }
        r.samples.push_back(o);
      }
      kv.record(plan, r);
      ASSERT_TRUE(core.apply(r).ok());
    }
    check("a step's answer");
  }

  void random_message() {
    const uint32_t r = rng() % 100;
    if (r < 12) {
      add();
    } else if (r < 18 && !live.empty()) {
      core.cancel_group(live[rng() % live.size()]);
    } else if (r < 22 && !live.empty()) {
      core.finish_sequence(live[rng() % live.size()], int32_t(rng() % 3), FinishReason::stop);
    } else if (r < 55) {
      book();
    } else {
      answer(rng() % 40 == 0);
    }
    drop_events();
    check("a message");
  }

  void drain() {
    for (int guard = 0; guard < 20000 && (core.has_unfinished() || !in_flight.empty()); ++guard) {
      book();
      answer(false);
      drop_events();
    }
    while (core.can_prepare()) book();  // the last frees
    // One more booking carries the last retired steps.
    core.commit(booker.book(core.prepare()));
  }
};

void run(KvLayout layout, int32_t blocks, uint32_t seed) {
  Rig rig(blocks, 4, layout, seed);
  for (int i = 0; i < 3000; ++i) {
    rig.random_message();
    if (::testing::Test::HasFatalFailure()) return;
  }
  rig.drain();
  EXPECT_FALSE(rig.core.has_unfinished());
  EXPECT_TRUE(rig.in_flight.empty());
  const BlockManager& bm = rig.booker.manager();
  EXPECT_EQ(bm.num_seqs(), 0);
  EXPECT_EQ(bm.num_free_blocks() + bm.num_cached_blocks(), bm.total_blocks());
  EXPECT_EQ(rig.booker.num_logged_steps(), 0u);
  EXPECT_LE(rig.booker.num_open_steps(), 1u);  // the last booking's own
}

TEST(BlockBookingProtocol, RandomMessagesKeepThePoolsInvariants) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    run(KvLayout::paged, 40, seed);
  }
}

TEST(BlockBookingProtocol, TightPoolsPreemptAndStillReturnEveryBlock) {
  for (uint32_t seed = 11; seed <= 14; ++seed) {
    SCOPED_TRACE(seed);
    run(KvLayout::paged, 16, seed);
  }
}

TEST(BlockBookingProtocol, ContiguousLayout) {
  for (uint32_t seed = 21; seed <= 23; ++seed) {
    SCOPED_TRACE(seed);
    run(KvLayout::contiguous, 120, seed);
  }
}

}  // namespace
}  // namespace pagoda::actors
