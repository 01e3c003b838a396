// Helpers shared by the libFuzzer targets of tests/fuzz (header-only).
//
// Contract of every target: LLVMFuzzerTestOneInput returns 0 for any input;
// a crash, a sanitizer report, a broken invariant (FUZZ_CHECK aborts) or a
// hang (libFuzzer's -timeout) is a finding. Targets are single-threaded.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

// An invariant of the code under test; aborts (a libFuzzer crash) when false.
#define FUZZ_CHECK(cond, what)                                                  \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", what, __FILE__, __LINE__); \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

namespace pagoda::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits `in` at the first occurrence of `sep` (absent: all of it is the head).
inline std::pair<std::string_view, std::string_view> split_once(std::string_view in,
                                                                std::string_view sep) {
  const size_t at = in.find(sep);
  if (at == std::string_view::npos) return {in, {}};
  return {in.substr(0, at), in.substr(at + sep.size())};
}

// Splits `in` at every `sep`.
inline std::vector<std::string_view> split_all(std::string_view in, std::string_view sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t at = in.find(sep);
    if (at == std::string_view::npos) break;
    out.push_back(in.substr(0, at));
    in.remove_prefix(at + sep.size());
  }
  out.push_back(in);
  return out;
}

// A per-process scratch file (the readers under test take paths): written
// anew for each input under $TMPDIR (default /tmp), removed at exit.
struct ScratchFile {
  explicit ScratchFile(const char* suffix) {
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp && *tmp ? tmp : "/tmp") + "/pagoda_fuzz_" +
           std::to_string(::getpid()) + suffix;
  }
  ~ScratchFile() { ::unlink(path.c_str()); }
  std::string path;
};

inline bool write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

// tests/data, as the gtests find it.
inline std::string test_data(const std::string& rel) {
  return std::string(PAGODA_TEST_DATA_DIR) + "/" + rel;
}

}  // namespace pagoda::fuzz
