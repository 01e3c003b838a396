// ThreadPool: a fixed set of worker threads for the CPU backend's data-parallel
// loops (GEMM rows, attention heads). One parallel_for at a time per pool: the
// caller (the executor thread) takes a share of the work itself and returns
// when every chunk is done.
//
// Contract: parallel_for(n, fn) calls fn(begin, end) on disjoint ranges that
// cover [0, n) exactly once; fn must be safe to run concurrently on disjoint
// ranges and must not throw. Not re-entrant: fn must not call parallel_for on
// the same pool. Thread-safety: parallel_for may be called from one thread at a
// time (the owner).
//
// Cost per call (the forward pass makes ~15 per layer): no allocation, no lock
// and no system call while the workers are awake. Chunks are claimed with one
// compare-and-swap on a word that holds (generation, chunk count, next chunk), so a worker
// late from an earlier call can never claim a chunk of the next one. Between
// calls the workers spin (pause) for spin_us microseconds and only then sleep
// on a condition variable; the caller spins while the last chunks finish
// (yielding after a while, for oversubscribed machines).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda::gpu::cpu {

class ThreadPool {
 public:
  // num_threads == 0 picks default_thread_count(). The calling thread counts
  // as one of them: num_threads - 1 workers start. spin_us < 0 picks
  // PAGODA_CPU_SPIN_US (default 200).
  explicit ThreadPool(size_t num_threads = 0, int spin_us = -1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Splits [0, n) into at most size() * 4 chunks of at least min_chunk items.
  // fn: any callable (size_t begin, size_t end); it is not copied.
  template <class F>
  void parallel_for(size_t n, const F& fn, size_t min_chunk = 1) {
    run(n, min_chunk, &trampoline<F>, &fn);
  }

  // Physical cores available to this process (distinct core ids among the
  // CPUs of its affinity mask, from /sys), at least 1; falls back to
  // std::thread::hardware_concurrency().
  static size_t physical_cores();
  // PAGODA_CPU_THREADS when set and > 0, else physical_cores().
  static size_t default_thread_count();

  // A process-wide pool of default_thread_count() threads.
  static ThreadPool& global();

 private:
  using Call = void (*)(const void*, size_t, size_t);
  template <class F>
  static void trampoline(const void* f, size_t b, size_t e) {
    (*static_cast<const F*>(f))(b, e);
  }

  void run(size_t n, size_t min_chunk, Call call, const void* fn);
  void worker_loop();
  // Claims and runs chunks of generation gen until none is left.
  void drain(uint32_t gen);
  // Spins up to spin_us_ for a generation other than seen, then sleeps.
  uint32_t wait_for_work(uint32_t seen);

  std::vector<std::thread> workers_;
  int spin_us_;
  // (generation << 32) | (chunks << 16) | next chunk index. Written by the
  // owner to publish a call (seq_cst), advanced by CAS by whoever claims a
  // chunk; a claim is valid only while the word's generation is current.
  std::atomic<uint64_t> state_{0};
  // The published call; stable while its generation has chunks pending.
  std::atomic<Call> call_{nullptr};
  std::atomic<const void*> fn_{nullptr};
  std::atomic<size_t> n_{0}, chunk_{1};
  std::atomic<size_t> pending_{0};  // chunks of the current call not finished
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // only for sleeping workers
  std::condition_variable work_cv_;
};

}  // namespace pagoda::gpu::cpu
