// steady_now_ns: the steady clock in nanoseconds since its epoch, for step
// and wait timings in actors/. Thread-safe (a clock read).
#pragma once

#include <chrono>
#include <cstdint>

namespace pagoda::actors {

inline int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace pagoda::actors
