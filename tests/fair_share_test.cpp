// FairShare (the Virtual Token Counter): charging, weights, the lift of a
// client that returns from idle, admission order; and a property test that
// serves random arrival sequences with a toy server and checks the fairness
// bound of actors/fair_share.hpp after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "actors/fair_share.hpp"

namespace pagoda::actors {
namespace {

TEST(FairShare, ChargesPromptAndOutputWithTheirWeights) {
  FairShareConfig c;
  c.prompt_weight = 1.0;
  c.output_weight = 2.0;
  FairShare fs(c);
  fs.charge_prompt("a", 10);
  EXPECT_DOUBLE_EQ(fs.counter("a"), 10.0);
  fs.charge_output("a", 3);
  EXPECT_DOUBLE_EQ(fs.counter("a"), 16.0);
  EXPECT_DOUBLE_EQ(fs.counter("b"), 0.0);
  EXPECT_DOUBLE_EQ(fs.prompt_cost("b", 4), 4.0);
}

TEST(FairShare, ClientWeightDividesTheCharge) {
  FairShareConfig c;
  c.client_weights = {{"big", 4.0}, {"bad", -1.0}};
  FairShare fs(c);
  fs.charge_prompt("big", 8);
  fs.charge_output("big", 2);
  EXPECT_DOUBLE_EQ(fs.counter("big"), (8.0 + 4.0) / 4.0);
  EXPECT_DOUBLE_EQ(fs.weight("bad"), 1.0);  // a weight that is not > 0 counts as 1
  EXPECT_DOUBLE_EQ(fs.weight("other"), 1.0);
}

TEST(FairShare, ReturningClientIsLiftedToTheLowestBackloggedCounter) {
  FairShare fs;
  fs.arrive("a");
  fs.arrive("b");
  fs.charge_prompt("a", 100);
  fs.charge_prompt("b", 60);
  fs.arrive("idle");  // never served: 0 would win every admission for a long time
  EXPECT_DOUBLE_EQ(fs.counter("idle"), 60.0);
  // A client above the floor keeps its own counter.
  fs.charge_prompt("rich", 500);
  fs.arrive("rich");
  EXPECT_DOUBLE_EQ(fs.counter("rich"), 500.0);
  // A second request of an already backlogged client is not lifted again.
  fs.charge_prompt("b", 100);  // b: 160
  fs.arrive("idle");
  EXPECT_DOUBLE_EQ(fs.counter("idle"), 60.0);
  EXPECT_EQ(fs.queued("idle"), 2);
}

TEST(FairShare, WithNoneBackloggedTheLiftIsTheLastClientToLeave) {
  FairShare fs;
  fs.start("a");
  fs.arrive("a");
  fs.charge_prompt("a", 40);
  fs.leave("a");  // a's request admitted: the queue is empty
  EXPECT_FALSE(fs.backlogged("a"));
  fs.charge_output("a", 5);  // a keeps being served while running: 50
  fs.arrive("b");
  EXPECT_DOUBLE_EQ(fs.counter("b"), 50.0);
}

// The credit: a returning client stands at the floor less its credit; its
// level (counter + credit left) is the floor, charges use the credit up
// first, and a later lift starts from levels, so credits never chain.
TEST(FairShare, TheLiftsCreditPutsAReturningClientBelowTheFloorOnce) {
  FairShare fs;
  fs.arrive("flood");
  fs.charge_prompt("flood", 100);
  fs.arrive("light", true, 30.0);
  EXPECT_DOUBLE_EQ(fs.counter("light"), 70.0);
  EXPECT_DOUBLE_EQ(fs.level("light"), 100.0);
  // A third client lifted while only the credited one were backlogged would
  // reach 70 - 50 = 20 from its counter; from its level it gets 100 - 50.
  fs.leave("flood");
  fs.arrive("other", true, 50.0);
  EXPECT_DOUBLE_EQ(fs.counter("other"), 50.0);
  // Charges use the credit up first.
  fs.charge_prompt("light", 10);
  EXPECT_DOUBLE_EQ(fs.counter("light"), 80.0);
  EXPECT_DOUBLE_EQ(fs.level("light"), 100.0);
  fs.charge_output("light", 15);  // 30 more: 20 of credit left is used, the level grows by 10
  EXPECT_DOUBLE_EQ(fs.counter("light"), 110.0);
  EXPECT_DOUBLE_EQ(fs.level("light"), 110.0);
  // Leaving the queue records the level for the next lift with none backlogged.
  FairShare solo;
  solo.arrive("a", true, 0.0);
  solo.charge_prompt("a", 40);
  solo.leave("a");
  solo.arrive("b", true, 25.0);
  solo.leave("b");  // its level, 40, not its counter, 15
  solo.arrive("c", true, 25.0);
  EXPECT_DOUBLE_EQ(solo.counter("c"), 15.0);
  EXPECT_DOUBLE_EQ(solo.level("c"), 40.0);
  // A client above the floor keeps its counter and gets no credit.
  solo.charge_prompt("rich", 500);
  solo.arrive("rich", true, 25.0);
  EXPECT_DOUBLE_EQ(solo.level("rich"), 500.0);
}

TEST(FairShare, OrderTakesTheLowestCounterAndChargesTentatively) {
  FairShare fs;
  const std::string a = "a", b = "b";
  for (int i = 0; i < 3; ++i) fs.arrive(a);
  fs.arrive(b);
  fs.charge_prompt(a, 5);  // a: 5, b: 0
  // Queue order a, a, a, b (a flooded first); b's head goes first, then a's
  // (b's prompt of 20 puts b at 20 > 5), a again (5+10 = 15 < 20), then a.
  std::vector<FairShare::Candidate> q = {{&a, 10, false}, {&a, 10, false}, {&a, 10, false}, {&b, 20, false}};
  EXPECT_EQ(fs.order(q, 10), (std::vector<size_t>{3, 0, 1, 2}));
  EXPECT_EQ(fs.order(q, 2), (std::vector<size_t>{3, 0}));
  EXPECT_DOUBLE_EQ(fs.counter(a), 5.0);  // order() charges nothing
  // An already charged (preempted) request adds no tentative charge.
  q[3].charged = true;
  fs.charge_prompt(b, 5);  // b: 5 == a: the earlier head (a's) wins the tie
  EXPECT_EQ(fs.order(q, 10), (std::vector<size_t>{0, 3, 1, 2}));
}

// A client that returns from idle is lifted to the flooding client's counter;
// on that tie the client with fewer requests running goes first, not the
// flood's older head. With equal running counts the earlier head still wins.
TEST(FairShare, OnEqualCountersFewerRunningGoesFirst) {
  FairShare fs;
  const std::string flood = "flood", light = "light";
  for (int i = 0; i < 4; ++i) fs.start(flood);  // 4 requests: 2 running, 2 queued
  fs.arrive(flood);
  fs.arrive(flood);
  fs.charge_prompt(flood, 30);
  EXPECT_EQ(fs.running(flood), 2);
  fs.start(light);
  fs.arrive(light);  // lifted to flood's 30
  EXPECT_DOUBLE_EQ(fs.counter(light), fs.counter(flood));
  EXPECT_EQ(fs.running(light), 0);
  std::vector<FairShare::Candidate> q = {{&flood, 8, false}, {&flood, 8, false}, {&light, 8, false}};
  EXPECT_EQ(fs.order(q, 10), (std::vector<size_t>{2, 0, 1}));
  // Equal running counts too: the earlier head wins again.
  FairShare even;
  even.arrive(flood);
  even.arrive(light);
  EXPECT_EQ(even.order(q, 10), (std::vector<size_t>{0, 2, 1}));
}

TEST(FairShare, FcfsWithinAClient) {
  FairShare fs;
  const std::string a = "a";
  std::vector<FairShare::Candidate> q = {{&a, 1, false}, {&a, 1, false}, {&a, 1, false}};
  EXPECT_EQ(fs.order(q, 10), (std::vector<size_t>{0, 1, 2}));
}

TEST(FairShare, ForgetsIdleClientsTheLiftWouldRaiseAnyway) {
  FairShare fs;
  fs.start("busy");
  fs.arrive("busy");
  fs.charge_prompt("busy", 100);
  fs.start("poor");
  fs.finish("poor");  // counter 0 <= the floor (100): nothing to keep
  EXPECT_EQ(fs.num_clients(), 1u);
  fs.start("rich");
  fs.charge_output("rich", 200);  // 400 > the floor
  fs.finish("rich");
  EXPECT_EQ(fs.num_clients(), 2u);
  EXPECT_DOUBLE_EQ(fs.counter("rich"), 400.0);
}

TEST(FairShare, MemoryStaysBoundedUnderManyClients) {
  FairShareConfig c;
  c.max_idle_clients = 16;
  FairShare fs(c);
  for (int i = 0; i < 1000; ++i) {
    const std::string name = "u" + std::to_string(i);
    fs.start(name);
    fs.charge_output(name, 1000 + i);  // all above the floor
    fs.finish(name);
  }
  EXPECT_LE(fs.num_clients(), 17u);
}

// A toy server: KV capacity of `cap` tokens; a request reserves prompt +
// output at admission (so nothing is preempted) and generates one token per
// step. Admission follows FairShare::order and stops at the first request that
// does not fit (as the booker does). With every prompt <= L and the outputs of
// running requests <= cap in total, between two admissions at most cap tokens
// are generated, so backlogged clients' counters differ by at most
// (w_p * L + w_q * cap) / min weight; and over an interval in which two
// clients stay backlogged, their normalised service differs by at most twice
// that.
struct ToyRequest {
  int client = 0;
  int prompt = 0, output = 0, generated = 0;
};

struct Toy {
  std::vector<std::string> names;
  FairShare fs;
  bool credit = false;  // lifts carry the request's prompt cost (as the scheduler's)
  std::deque<ToyRequest> queue;
  std::vector<ToyRequest> running;
  int cap = 0, used = 0;

  void arrive(int c, int prompt, int output) {
    fs.start(names[size_t(c)]);
    const std::string& name = names[size_t(c)];
    fs.arrive(name, true, credit ? fs.prompt_cost(name, prompt) : 0.0);
    queue.push_back({c, prompt, output, 0});
  }
  void admit() {
    std::vector<FairShare::Candidate> q;
    for (const ToyRequest& r : queue) q.push_back({&names[size_t(r.client)], r.prompt, false});
    std::vector<size_t> picked;
    for (size_t i : fs.order(q, q.size())) {
      const ToyRequest& r = queue[i];
      if (used + r.prompt + r.output > cap) break;
      used += r.prompt + r.output;
      fs.leave(names[size_t(r.client)]);
      fs.charge_prompt(names[size_t(r.client)], r.prompt);
      running.push_back(r);
      picked.push_back(i);
    }
    std::sort(picked.rbegin(), picked.rend());
    for (size_t i : picked) queue.erase(queue.begin() + std::ptrdiff_t(i));
  }
  void decode() {
    for (ToyRequest& r : running) {
      r.generated++;
      fs.charge_output(names[size_t(r.client)], 1);
    }
    for (auto it = running.begin(); it != running.end();) {
      if (it->generated < it->output) {
        ++it;
        continue;
      }
      used -= it->prompt + it->output;
      fs.finish(names[size_t(it->client)]);
      it = running.erase(it);
    }
  }
};

// With credit, the bound grows by the largest credit (w_p * L / min weight).
TEST(FairSharePropertyTest, BackloggedCountersStayWithinTheBound) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    const int clients = 2 + int(rng() % 4);
    const int max_prompt = 1 + int(rng() % 40), max_output = 1 + int(rng() % 40);
    FairShareConfig cfg;
    cfg.prompt_weight = 1.0 + double(rng() % 3);
    cfg.output_weight = 1.0 + double(rng() % 3);
    cfg.max_idle_clients = seed % 2 ? 4096 : 1;  // odd seeds: forgetting under pressure too
    double min_weight = 1.0;
    Toy toy;
    for (int c = 0; c < clients; ++c) {
      toy.names.push_back("c" + std::to_string(c));
      if (rng() % 3 == 0) {
        const double w = double(1 + rng() % 4) / 2.0;
        cfg.client_weights[toy.names.back()] = w;
        min_weight = std::min(min_weight, w);
      }
    }
    toy.fs = FairShare(cfg);
    toy.credit = seed > 200;  // seeds 201-300: the scheduler's lift, with credit
    toy.cap = max_prompt + max_output + int(rng() % 200);
    const double bound = (cfg.prompt_weight * max_prompt * (toy.credit ? 2 : 1) + cfg.output_weight * toy.cap) /
                         min_weight;
    // Per client, an arrival probability (in 1/1000 per step): floods and
    // trickles; some clients go idle for stretches.
    std::vector<int> rate(static_cast<size_t>(clients), 0);
    for (int& r : rate) r = int(rng() % 1000);
    // The counter of each client when the current backlogged stretch of a
    // pair began (interval service bound).
    std::vector<std::vector<double>> since(size_t(clients), std::vector<double>(size_t(clients), -1.0));
    std::vector<std::vector<double>> since_other = since;
    for (int step = 0; step < 600; ++step) {
      for (int c = 0; c < clients; ++c) {
        if (step % 150 > 120 && c == 0) continue;  // client 0 pauses now and then
        if (int(rng() % 1000) < rate[size_t(c)]) {
          toy.arrive(c, 1 + int(rng() % unsigned(max_prompt)), 1 + int(rng() % unsigned(max_output)));
        }
      }
      toy.admit();
      toy.decode();
      for (int f = 0; f < clients; ++f) {
        for (int g = 0; g < clients; ++g) {
          const std::string& nf = toy.names[size_t(f)];
          const std::string& ng = toy.names[size_t(g)];
          const bool both = f != g && toy.fs.backlogged(nf) && toy.fs.backlogged(ng);
          if (!both) {
            since[size_t(f)][size_t(g)] = -1.0;
            continue;
          }
          const double cf = toy.fs.counter(nf), cg = toy.fs.counter(ng);
          ASSERT_LE(cf - cg, bound + 1e-9) << "seed " << seed << " step " << step << " " << nf << " vs " << ng;
          if (since[size_t(f)][size_t(g)] < 0) {
            since[size_t(f)][size_t(g)] = cf;
            since_other[size_t(f)][size_t(g)] = cg;
          }
          const double service = (cf - since[size_t(f)][size_t(g)]) - (cg - since_other[size_t(f)][size_t(g)]);
          ASSERT_LE(service, 2 * bound + 1e-9) << "seed " << seed << " step " << step;
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::actors
