// Which scheduling the engine suites run with: one step ahead (the default)
// or lockstep when PAGODA_TEST_SCHEDULING=lockstep (ctest registers the
// engine suites once in each mode; outputs must be identical). Header-only.
#pragma once

#include <cstdlib>
#include <string>

namespace pagoda::test {

inline bool async_scheduling_under_test() {
  const char* mode = std::getenv("PAGODA_TEST_SCHEDULING");
  return mode == nullptr || std::string(mode) != "lockstep";
}

}  // namespace pagoda::test
