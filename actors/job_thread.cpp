#include "actors/job_thread.hpp"

namespace pagoda::actors {

JobThread::JobThread() : thread_([this] { loop(); }) {}

JobThread::~JobThread() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void JobThread::start(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.notify_all();
}

void JobThread::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

void JobThread::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || busy_; });
    if (!busy_) return;  // stopping with nothing to do
    std::function<void()> job = std::move(job_);
    lock.unlock();
    job();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace pagoda::actors
