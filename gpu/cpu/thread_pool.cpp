#include "gpu/cpu/thread_pool.hpp"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace pagoda::gpu::cpu {

namespace {

using Clock = std::chrono::steady_clock;

// The state word: generation (32 bits) | chunks of that call (16) | next chunk (16).
// The chunk count lives in the word a worker claims with, so a worker that
// still holds a word of an earlier generation can never compare it with a
// later call's count (it once did: it then claimed a chunk of a call not yet
// published, and the caller's pending count wrapped: a hang; found by TSan).
constexpr uint64_t kChunkMask = 0xFFFF;
uint32_t gen_of(uint64_t s) { return static_cast<uint32_t>(s >> 32); }
uint32_t chunks_of(uint64_t s) { return static_cast<uint32_t>((s >> 16) & kChunkMask); }
uint32_t index_of(uint64_t s) { return static_cast<uint32_t>(s & kChunkMask); }

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end != v ? x : fallback;
}

}  // namespace

ThreadPool::ThreadPool(size_t num_threads, int spin_us)
    : spin_us_(spin_us >= 0 ? spin_us : int(std::max(0L, env_long("PAGODA_CPU_SPIN_US", 200)))) {
  if (num_threads == 0) num_threads = default_thread_count();
  for (size_t i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    state_.fetch_add(uint64_t{1} << 32);  // wakes spinners
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(uint32_t gen) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (gen_of(s) != gen || index_of(s) >= chunks_of(s)) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // s reloaded
    }
    // Claimed chunk index_of(s) of gen: the call stays published until it is done.
    const size_t n = n_.load(std::memory_order_relaxed), chunk = chunk_.load(std::memory_order_relaxed);
    const size_t begin = size_t(index_of(s)) * chunk;
    call_.load(std::memory_order_relaxed)(fn_.load(std::memory_order_relaxed), begin,
                                          std::min(n, begin + chunk));
    pending_.fetch_sub(1, std::memory_order_release);
    s = state_.load(std::memory_order_acquire);
  }
}

uint32_t ThreadPool::wait_for_work(uint32_t seen) {
  const auto deadline = Clock::now() + std::chrono::microseconds(spin_us_);
  for (uint32_t i = 0;; ++i) {
    const uint32_t g = gen_of(state_.load(std::memory_order_acquire));
    if (g != seen || stop_.load(std::memory_order_relaxed)) return g;
    _mm_pause();
    if ((i & 63) == 63 && Clock::now() >= deadline) break;
  }
  std::unique_lock<std::mutex> lock(mu_);
  sleepers_.fetch_add(1);
  work_cv_.wait(lock, [&] { return stop_.load() || gen_of(state_.load()) != seen; });
  sleepers_.fetch_sub(1);
  return gen_of(state_.load(std::memory_order_acquire));
}

void ThreadPool::worker_loop() {
  // Generation 0 is the constructor's; a worker that starts late (even after
  // the destructor's bump) still sees every later generation as new.
  uint32_t seen = 0;
  for (;;) {
    seen = wait_for_work(seen);
    if (stop_.load()) return;
    drain(seen);
  }
}

void ThreadPool::run(size_t n, size_t min_chunk, Call call, const void* fn) {
  if (n == 0) return;
  const size_t max_chunks = std::min<size_t>(size() * 4, kChunkMask);
  const size_t chunk = std::max(std::max<size_t>(min_chunk, 1), (n + max_chunks - 1) / max_chunks);
  if (workers_.empty() || chunk >= n) {
    call(fn, 0, n);
    return;
  }
  const size_t chunks = (n + chunk - 1) / chunk;
  call_.store(call, std::memory_order_relaxed);
  fn_.store(fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  chunk_.store(chunk, std::memory_order_relaxed);
  pending_.store(chunks, std::memory_order_relaxed);
  const uint32_t gen = gen_of(state_.load(std::memory_order_relaxed)) + 1;
  state_.store(uint64_t{gen} << 32 | uint64_t{chunks} << 16);  // seq_cst: before the sleepers_ check
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    work_cv_.notify_all();
  }
  drain(gen);
  const auto start = Clock::now();
  // Unsigned: the spin may outlast 2^31 iterations on a loaded machine (UBSan: signed overflow).
  for (uint32_t i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    _mm_pause();
    // A worker may have been descheduled mid-chunk: stop burning its core.
    if ((i & 255) == 255 && Clock::now() - start > std::chrono::microseconds(100)) sched_yield();
  }
}

size_t ThreadPool::physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const size_t fallback = std::max(1u, std::thread::hardware_concurrency());
  if (sched_getaffinity(0, sizeof set, &set) != 0) return fallback;
  std::set<std::pair<int, int>> cores;  // (package, core id)
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
    int c = cpu, p = 0;
    if (!(core >> c)) c = cpu;
    if (!(pkg >> p)) p = 0;
    cores.insert({p, c});
  }
  return cores.empty() ? fallback : cores.size();
}

size_t ThreadPool::default_thread_count() {
  const long env = env_long("PAGODA_CPU_THREADS", 0);
  return env > 0 ? size_t(env) : physical_cores();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(default_thread_count());
  return pool;
}

}  // namespace pagoda::gpu::cpu
