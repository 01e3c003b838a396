// Tests for gpu/cpu/thread_pool.hpp: exact coverage of [0, n) on every call,
// including back-to-back calls (a worker late from call i must not claim a
// chunk of call i+1), the sleeping path (spin 0) and the spinning path.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gpu/cpu/thread_pool.hpp"

namespace pagoda::gpu::cpu {
namespace {

// Runs `calls` parallel_for calls of varying n; each index of each call must
// be visited exactly once, by a range inside [0, n).
void check_coverage(ThreadPool& pool, int calls) {
  std::vector<std::atomic<int>> hits(4096);
  for (int c = 0; c < calls; ++c) {
    const size_t n = size_t(1 + (c * 37) % 4096);
    for (size_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
    std::atomic<bool> bad{false};
    pool.parallel_for(n, [&](size_t b, size_t e) {
      if (b >= e || e > n) bad = true;
      for (size_t i = b; i < e && i < n; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    }, size_t(1 + c % 5));
    ASSERT_FALSE(bad.load()) << "call " << c;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "call " << c << " index " << i;
  }
}

TEST(ThreadPool, CoversEveryIndexOnceSpinning) {
  ThreadPool pool(3, 1000);
  EXPECT_EQ(pool.size(), 3u);
  check_coverage(pool, 3000);
}

// Oversubscribed (more threads than cores, so workers are preempted at any
// instruction) with chunk counts alternating small and large: a worker that
// read the state of a 2-chunk call and was preempted before claiming must
// not claim anything of the next 32-chunk call (before the fix it compared
// its stale index with the new call's chunk count, ran a chunk twice and
// left the caller spinning on a wrapped pending count).
TEST(ThreadPool, StaleWorkerNeverClaimsTheNextCall) {
  const size_t threads = std::max<size_t>(8, 4 * std::thread::hardware_concurrency());
  ThreadPool pool(threads, 20);
  const size_t big = pool.size() * 4;
  std::vector<std::atomic<int>> hits(big);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  // The bug's symptom is a hang: a watchdog turns it into a failure.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 600 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!done.load()) {
      std::fprintf(stderr, "StaleWorkerNeverClaimsTheNextCall: parallel_for hung (stale claim)\n");
      std::abort();
    }
  });
  int calls = 0;
  for (; std::chrono::steady_clock::now() < deadline; ++calls) {
    const size_t n = (calls % 2 == 0) ? 2 : big;
    for (size_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    bool once = true;
    for (size_t i = 0; i < n; ++i) once = once && hits[i].load() == 1;
    if (!once) {
      ADD_FAILURE() << "call " << calls << ": an index ran twice or never";
      break;
    }
  }
  done = true;
  watchdog.join();
  EXPECT_GT(calls, 1000);
}

TEST(ThreadPool, CoversEveryIndexOnceSleeping) {
  ThreadPool pool(4, 0);  // workers sleep after every call
  check_coverage(pool, 1000);
}

TEST(ThreadPool, WakesAfterIdle) {
  ThreadPool pool(2, 50);
  std::atomic<int> sum{0};
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers asleep now
    pool.parallel_for(100, [&](size_t b, size_t e) { sum += int(e - b); });
  }
  EXPECT_EQ(sum.load(), 300);
}

TEST(ThreadPool, UsesTheWorkers) {
  ThreadPool pool(2, 1000);
  std::atomic<int> other{0};
  const auto me = std::this_thread::get_id();
  // Chunks slow enough that the worker gets some of them.
  for (int c = 0; c < 50 && other.load() == 0; ++c) {
    pool.parallel_for(8, [&](size_t, size_t) {
      if (std::this_thread::get_id() != me) ++other;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
  }
  EXPECT_GT(other.load(), 0);
}

// Destroying a pool whose workers have not started yet (or have not seen any
// call) must not hang: a late worker still sees the shutdown.
TEST(ThreadPool, DestroysBeforeWorkersStart) {
  for (int i = 0; i < 300; ++i) {
    ThreadPool pool(3, i % 2 == 0 ? 0 : 100);
    if (i % 3 == 0) pool.parallel_for(5, [](size_t, size_t) {});
  }
  SUCCEED();
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  size_t got_b = 99, got_e = 0;
  int calls = 0;
  pool.parallel_for(10, [&](size_t b, size_t e) { got_b = b, got_e = e, ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(got_b, 0u);
  EXPECT_EQ(got_e, 10u);
  pool.parallel_for(0, [&](size_t, size_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, DefaultsComeFromPhysicalCores) {
  const size_t cores = ThreadPool::physical_cores();
  EXPECT_GE(cores, 1u);
  EXPECT_LE(cores, size_t(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_GE(ThreadPool::default_thread_count(), 1u);
}

}  // namespace
}  // namespace pagoda::gpu::cpu
