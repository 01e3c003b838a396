#include "cpu_peaks.hpp"

#include <immintrin.h>

// GCC 12 warns inside its own AVX-512 headers about unused pass-through operands.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <vector>

namespace pagoda::tools {

namespace {

using gpu::cpu::QuantIsa;
using gpu::cpu::ThreadPool;

// Elapsed seconds since a start() on the chosen clock.
struct Clock {
  bool cpu;
  std::chrono::steady_clock::time_point t0{};
  double c0 = 0;
  void start() {
    t0 = std::chrono::steady_clock::now();
    c0 = thread_cpu_seconds();
  }
  double seconds() const {
    return cpu ? thread_cpu_seconds() - c0
               : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

// Sum of 64-bit words of [p, p + n); 4 independent chains (vectorized by -O3).
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

constexpr int64_t kPeakIters = 1000000;  // per thread; ~0.05 s

// Each function: kPeakIters rounds of C independent chains (enough to cover
// the instructions' latency; each chain has its own second operand, so no
// product is shared); returns a value derived from the accumulators so
// nothing is optimized away. The asm barrier keeps the products in the loop.
// Chains: 12 vpdpbusd (latency 5, two per cycle); 8 zmm / 4 ymm pmaddubsw +
// paddw (the products are independent across rounds, so out-of-order
// execution overlaps them; more chains would spill the operands).
__attribute__((target("avx2"))) int peak_avx2() {
  constexpr int C = 4;
  __m256i a = _mm256_set1_epi8(3), b[C], s[C];
  for (int i = 0; i < C; ++i) b[i] = _mm256_set1_epi8(char(-2 - i)), s[i] = _mm256_setzero_si256();
  for (int64_t it = 0; it < kPeakIters; ++it) {
    __asm__("" : "+x"(a));
#pragma GCC unroll 12
    for (int i = 0; i < C; ++i) s[i] = _mm256_add_epi16(s[i], _mm256_maddubs_epi16(a, b[i]));
  }
  __m256i t = s[0];
  for (int i = 1; i < C; ++i) t = _mm256_xor_si256(t, s[i]);
  return _mm256_extract_epi32(t, 0);
}

__attribute__((target("avx2,avxvnni"))) int peak_avxvnni() {
  constexpr int C = 12;
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), s[C];
  for (auto& v : s) v = _mm256_setzero_si256();
  for (int64_t it = 0; it < kPeakIters; ++it) {
    __asm__("" : "+x"(a));
#pragma GCC unroll 12
    for (auto& v : s) v = _mm256_dpbusd_avx_epi32(v, a, b);
  }
  __m256i t = s[0];
  for (int i = 1; i < C; ++i) t = _mm256_xor_si256(t, s[i]);
  return _mm256_extract_epi32(t, 0);
}

__attribute__((target("avx512f,avx512bw"))) int peak_avx512bw() {
  constexpr int C = 8;
  __m512i a = _mm512_set1_epi8(3), b[C], s[C];
  for (int i = 0; i < C; ++i) b[i] = _mm512_set1_epi8(char(-2 - i)), s[i] = _mm512_setzero_si512();
  for (int64_t it = 0; it < kPeakIters; ++it) {
    __asm__("" : "+v"(a));
#pragma GCC unroll 12
    for (int i = 0; i < C; ++i) s[i] = _mm512_add_epi16(s[i], _mm512_maddubs_epi16(a, b[i]));
  }
  __m512i t = s[0];
  for (int i = 1; i < C; ++i) t = _mm512_xor_si512(t, s[i]);
  return _mm_cvtsi128_si32(_mm512_castsi512_si128(t));
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) int peak_avx512vnni() {
  constexpr int C = 12;
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2), s[C];
  for (auto& v : s) v = _mm512_setzero_si512();
  for (int64_t it = 0; it < kPeakIters; ++it) {
    __asm__("" : "+v"(a));
#pragma GCC unroll 12
    for (auto& v : s) v = _mm512_dpbusd_epi32(v, a, b);
  }
  __m512i t = s[0];
  for (int i = 1; i < C; ++i) t = _mm512_xor_si512(t, s[i]);
  return _mm_cvtsi128_si32(_mm512_castsi512_si128(t));
}

// Multiply-adds per round.
double macs_per_round(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::Avx2: return 4 * 32;
    case QuantIsa::AvxVnni: return 12 * 32;
    case QuantIsa::Avx512Bw: return 8 * 64;
    case QuantIsa::Avx512Vnni: return 12 * 64;
    case QuantIsa::Scalar: break;
  }
  return 0;
}

int run_peak(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::Avx2: return peak_avx2();
    case QuantIsa::AvxVnni: return peak_avxvnni();
    case QuantIsa::Avx512Bw: return peak_avx512bw();
    case QuantIsa::Avx512Vnni: return peak_avx512vnni();
    case QuantIsa::Scalar: break;
  }
  return 0;
}

}  // namespace

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

size_t default_bandwidth_bytes() {
  constexpr size_t kMin = size_t{512} << 20, kMax = size_t{2} << 30;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);  // 0 or -1 when unknown
  return std::clamp(l3 > 0 ? 4 * size_t(l3) : kMin, kMin, kMax);
}

double measure_read_bandwidth(ThreadPool& pool, bool cpu_clock, size_t bytes) {
  if (bytes == 0) bytes = default_bandwidth_bytes();
  const size_t words = bytes / 8;
  std::vector<uint64_t> buf(words);
  pool.parallel_for(words, [&](size_t b, size_t e) {  // first touch by the readers
    for (size_t i = b; i < e; ++i) buf[i] = i;
  });
  const size_t parts = pool.size();
  std::atomic<uint64_t> sink{0};
  double best = 0;
  Clock clock{cpu_clock};
  for (int pass = 0; pass < 5; ++pass) {
    clock.start();
    pool.parallel_for(parts, [&](size_t b, size_t e) {
      for (size_t p = b; p < e; ++p) {
        const size_t lo = words / parts * p, hi = p + 1 == parts ? words : words / parts * (p + 1);
        sink += sum_words(buf.data() + lo, hi - lo);
      }
    });
    best = std::max(best, double(words * 8) / clock.seconds());
  }
  return sink.load() == 1 ? 0 : best;  // (never 1: keeps the sums live)
}

double measure_int8_peak(QuantIsa isa, ThreadPool& pool, bool cpu_clock) {
  if (isa == QuantIsa::Scalar || !gpu::cpu::quant_isa_supported(isa)) return 0;
  const size_t parts = pool.size();
  std::atomic<int> sink{0};
  double best = 0;
  Clock clock{cpu_clock};
  for (int pass = 0; pass < 3; ++pass) {
    clock.start();
    pool.parallel_for(parts, [&](size_t b, size_t e) {
      for (size_t p = b; p < e; ++p) sink += run_peak(isa);
    });
    const double macs = macs_per_round(isa) * double(kPeakIters) * double(parts);
    best = std::max(best, 2 * macs / clock.seconds());
  }
  return sink.load() == 12345 ? best * 1.0 : best;
}

}  // namespace pagoda::tools
