// ThreadPool: a fixed set of worker threads for the CPU backend's data-parallel
// loops (GEMM rows, attention heads). One parallel_for at a time per pool: the
// caller (the executor thread) blocks until every chunk is done, and takes a
// share of the work itself.
//
// Contract: parallel_for(n, fn) calls fn(begin, end) on disjoint ranges that
// cover [0, n) exactly once; fn must be safe to run concurrently on disjoint
// ranges and must not throw. Not re-entrant: fn must not call parallel_for on
// the same pool. Thread-safety: parallel_for may be called from one thread at a
// time (the owner).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda::gpu::cpu {

class ThreadPool {
 public:
  // num_threads == 0 picks std::thread::hardware_concurrency() (at least 1).
  // The calling thread counts as one of them: num_threads - 1 workers start.
  explicit ThreadPool(size_t num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Splits [0, n) into at most size() * 4 chunks of at least min_chunk items.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                    size_t min_chunk = 1);

  // A process-wide pool sized from PAGODA_CPU_THREADS or the hardware.
  static ThreadPool& global();

 private:
  void worker_loop();
  bool run_one_chunk();  // claims one chunk under mu_, runs it unlocked

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t n_ = 0, chunk_ = 1, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace pagoda::gpu::cpu
