#include "gpu/cpu/thread_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace pagoda::gpu::cpu {

ThreadPool::ThreadPool(size_t num_threads) {
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

// Claims the next chunk and runs it outside the lock. Returns false when no
// chunk was left to claim.
bool ThreadPool::run_one_chunk() {
  size_t begin, end;
  const std::function<void(size_t, size_t)>* fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fn_ == nullptr || next_ >= n_) return false;
    begin = next_;
    end = std::min(n_, begin + chunk_);
    next_ = end;
    fn = fn_;
  }
  (*fn)(begin, end);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
  return true;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    while (run_one_chunk()) {
    }
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                              size_t min_chunk) {
  if (n == 0) return;
  size_t max_chunks = size() * 4;
  size_t chunk = std::max(std::max<size_t>(min_chunk, 1), (n + max_chunks - 1) / max_chunks);
  if (workers_.empty() || chunk >= n) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_ = 0;
    pending_ = (n + chunk - 1) / chunk;
    ++generation_;
  }
  work_cv_.notify_all();
  while (run_one_chunk()) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    const char* env = std::getenv("PAGODA_CPU_THREADS");
    return env ? static_cast<size_t>(std::max(0L, std::strtol(env, nullptr, 10))) : 0;
  }());
  return pool;
}

}  // namespace pagoda::gpu::cpu
