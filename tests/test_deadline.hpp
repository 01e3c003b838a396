// test_deadline(base): how long a test waits for the engine to make progress
// (a request to end, blocks to come back). The bases assume an optimised
// build; the sanitizer phases (tools/sanitize) run the same suites several
// times slower and set PAGODA_TEST_DEADLINE_SCALE (e.g. 5), which multiplies
// every such wait. Waits whose length is itself the assertion (a step timeout
// must fire within 3.5 s) do not use it. Header-only; any thread.
#pragma once

#include <chrono>
#include <cstdlib>

namespace pagoda::test {

inline double deadline_scale() {
  const char* v = std::getenv("PAGODA_TEST_DEADLINE_SCALE");
  const double x = v != nullptr ? std::atof(v) : 1.0;
  return x >= 1.0 ? x : 1.0;
}

inline std::chrono::milliseconds test_deadline(std::chrono::milliseconds base) {
  return std::chrono::milliseconds(static_cast<int64_t>(double(base.count()) * deadline_scale()));
}

}  // namespace pagoda::test
