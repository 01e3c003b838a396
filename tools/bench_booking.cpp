// bench_booking: the block-manager actor's booking round trip (scheduler ->
// (book_atom, BookingRequest) -> BookingReply) on a large pool while a
// reader keeps the KV map live (StatsBox::read_snapshot on another thread),
// and the time the reader's read takes. Synthetic (no model): `seqs`
// sequences of `blocks_per_seq` full blocks each decode one token per step;
// a step "computes" for --step-us between bookings.
// Usage: bench_booking [blocks] [seqs] [blocks_per_seq] [steps] [step_us]
#include <caf/all.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "actors/block_manager_actor.hpp"
#include "actors/messages.hpp"

using namespace pagoda::actors;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

BookingRequest admissions(int32_t seqs, int32_t tokens) {
  BookingRequest r;
  r.step_id = 1;
  r.budget = seqs * tokens;
  r.max_num_seqs = seqs;
  auto prompt = std::make_shared<std::vector<TokenId>>();
  for (int32_t t = 0; t < tokens; ++t) prompt->push_back(TokenId(t % 1000 + 1));
  for (int32_t s = 0; s < seqs; ++s) {
    GroupAdmit g;
    g.group = RequestId(s + 1);
    g.slots = 1;
    auto own = std::make_shared<std::vector<TokenId>>(*prompt);
    (*own)[0] = TokenId(s + 2000);  // distinct prompts: no prefix sharing
    g.seqs.push_back(SeqAdmit{SeqId(s + 1), 0, own});
    r.waiting.push_back(std::move(g));
  }
  return r;
}

BookingRequest decode_step(uint64_t step, int32_t seqs) {
  BookingRequest r;
  r.step_id = step;
  r.retire_steps = {step - 1};
  r.budget = seqs;
  r.max_num_seqs = seqs;
  for (int32_t s = 0; s < seqs; ++s) {
    GroupAppend g;
    g.group = RequestId(s + 1);
    g.slots = 1;
    g.seqs.push_back(SeqAppend{SeqId(s + 1), {TokenId(7)}, 0});
    r.running.push_back(std::move(g));
  }
  return r;
}

void report(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  std::printf("%s: n=%zu mean=%.3f ms p50=%.3f p99=%.3f max=%.3f\n", what, v.size(), sum / double(v.size()),
              v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], v.back());
}

// The same work called directly (no actor, no reader): one booking, the
// owner's capture, a reader's assemble, and the full build they replace.
void direct_costs(int32_t blocks, int32_t seqs, int32_t per_seq, int32_t block_size) {
  BlockManagerConfig bc;
  bc.num_blocks = blocks;
  bc.block_size = block_size;
  BlockBooker booker(std::move(BlockManager::create(bc)).value());
  booker.book(admissions(seqs, per_seq * block_size - 1));
  std::vector<double> book, capture, assemble_ms, full;
  for (int i = 0; i < 200; ++i) {
    const BookingRequest r = decode_step(uint64_t(i + 2), seqs);
    auto t0 = Clock::now();
    booker.book(r);
    book.push_back(ms_since(t0));
    if (i % 10 != 0) continue;
    t0 = Clock::now();
    KvCapture c = booker.capture();
    capture.push_back(ms_since(t0));
    t0 = Clock::now();
    KvSnapshot s = assemble(std::move(c));
    assemble_ms.push_back(ms_since(t0));
    t0 = Clock::now();
    s = booker.snapshot();
    full.push_back(ms_since(t0));
  }
  report("direct book()", book);
  report("direct capture() (owner)", capture);
  report("direct assemble() (reader)", assemble_ms);
  report("direct snapshot() (the old in-handler build)", full);
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i, int d) { return argc > i ? std::atoi(argv[i]) : d; };
  const int32_t blocks = arg(1, 131072), seqs = arg(2, 1024), per_seq = arg(3, 96);
  const int steps = arg(4, 400), step_us = arg(5, 2000), block_size = 16;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  BlockManagerConfig bc;
  bc.num_blocks = blocks;
  bc.block_size = block_size;
  auto bm = BlockManager::create(bc);
  if (!bm.ok()) return 1;
  auto stats = std::make_shared<StatsBox>();
  BlockManagerActorConfig config;
  caf::actor actor = spawn_block_manager_actor(
      sys, std::make_unique<BlockBooker>(std::move(bm).value()), stats, config);
  caf::scoped_actor self{sys};
  auto book = [&](const BookingRequest& r) {
    self->request(actor, caf::infinite, book_atom::value, r).receive(
        [](const BookingReply&) {}, [](caf::error&) { std::exit(2); });
  };
  book(admissions(seqs, per_seq * block_size - 1));
  std::atomic<bool> done{false};
  std::vector<double> reads;
  std::thread reader([&] {
    while (!done) {  // a UI polling the KV map
      const auto t0 = Clock::now();
      KvSnapshot s = stats->read_snapshot();
      reads.push_back(ms_since(t0));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<double> rtt;
  for (int i = 0; i < steps; ++i) {
    const BookingRequest r = decode_step(uint64_t(i + 2), seqs);
    const auto t0 = Clock::now();
    book(r);
    rtt.push_back(ms_since(t0));
    std::this_thread::sleep_for(std::chrono::microseconds(step_us));
  }
  done = true;
  reader.join();
  std::printf("pool %d blocks, %d seqs x %d blocks, %d steps, %d us per step\n", blocks, seqs, per_seq, steps,
              step_us);
  report("booking round trip", rtt);
  report("reader read_snapshot", reads);
  direct_costs(blocks, seqs, per_seq, block_size);
  anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return 0;
}
