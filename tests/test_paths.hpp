// Where the tests find their data, decided when they run, not when they are
// compiled: the environment variable of the same name when it is set and not
// empty, else the default the build compiled in (this source tree). So a
// test binary carried elsewhere (tools/gpu-bundle: the bundle's check.sh sets
// PAGODA_TEST_DATA_DIR to the bundle's copy) reads data beside it, not at a
// path of the build machine.
//
// Force-included into every test translation unit (tests/CMakeLists.txt,
// tools/CMakeLists.txt), which define the defaults PAGODA_TEST_DATA_DIR_DEFAULT
// (tests/data) and PAGODA_SHARED_DIR_DEFAULT (the shared folder beside the
// repository). PAGODA_TEST_DATA_DIR and PAGODA_SHARED_DIR are then expressions
// of type const char* (use them as std::string(PAGODA_TEST_DATA_DIR) + ...).
// Thread-safe as long as nobody sets the environment while tests run.
#pragma once

#include <cstdlib>

namespace pagoda::test {

// The value of the environment variable `name` when set and not empty, else `fallback`.
inline const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

}  // namespace pagoda::test

#define PAGODA_TEST_DATA_DIR \
  (::pagoda::test::env_or("PAGODA_TEST_DATA_DIR", PAGODA_TEST_DATA_DIR_DEFAULT))
#define PAGODA_SHARED_DIR (::pagoda::test::env_or("PAGODA_SHARED_DIR", PAGODA_SHARED_DIR_DEFAULT))
