// MaskFiller: one background thread that runs a job while the caller does
// something else (the executor: the ConstraintBook's prepare() while the
// forward pass runs, issue 23). start() hands a job over; wait() returns once
// it ran (rethrowing nothing: the job must not throw). One job at a time.
// Thread-safety: start/wait from one thread (the owner); the job runs on the
// filler's thread. The destructor waits for a running job and joins.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pagoda::actors {

class MaskFiller {
 public:
  MaskFiller();
  ~MaskFiller();
  MaskFiller(const MaskFiller&) = delete;
  MaskFiller& operator=(const MaskFiller&) = delete;

  // Requires no job in flight (wait() after each start()).
  void start(std::function<void()> job);
  void wait();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace pagoda::actors
