// JobThread: one background thread that runs a job while the caller does
// something else. The executor has two: the mask filler (the
// ConstraintBook's prepare() while the forward pass runs, issue 23) and the
// step thread (a step's forward pass and sampling while the executor actor
// prepares the next step, issue 22). start() hands a job over; wait()
// returns once it ran (rethrowing nothing: the job must not throw). One job
// at a time. Thread-safety: start/wait from one thread (the owner); the job
// runs on this object's thread, and everything it wrote is visible to the
// owner once wait() returned. The destructor waits for a running job and joins.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pagoda::actors {

class JobThread {
 public:
  JobThread();
  ~JobThread();
  JobThread(const JobThread&) = delete;
  JobThread& operator=(const JobThread&) = delete;

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
