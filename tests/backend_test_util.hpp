// Backend-agnostic helpers for the op tests (CPU and CUDA alike): host <->
// backend copies through the Backend interface, bf16 rounding, and
// comparisons that report the worst error/limit ratio so that tolerances can
// be tuned from one run. Needs no CUDA header; failures are reported through
// GoogleTest (ADD_FAILURE / EXPECT), so call these from a test body only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::test {

// n uniform values in [lo, hi) from a fixed seed.
inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}


// A new buffer of `b` holding v (an empty buffer for an empty v).
template <class T>
DeviceBuffer put(Backend& b, const std::vector<T>& v) {
  auto buf = b.allocate(v.size() * sizeof(T));
  if (!buf) {
    ADD_FAILURE() << "allocate: " << buf.error().message;
    return DeviceBuffer();
  }
  if (!v.empty()) {
    auto up = b.upload(*buf, 0, v.data(), v.size() * sizeof(T));
    if (!up) ADD_FAILURE() << "upload: " << up.error().message;
  }
  return std::move(buf).value();
}

// The first n elements of buf.
template <class T>
std::vector<T> get(Backend& b, const DeviceBuffer& buf, size_t n) {
  std::vector<T> v(n);
  auto r = b.download(buf, 0, v.data(), n * sizeof(T));
  if (!r) ADD_FAILURE() << "download: " << r.error().message;
  return v;
}

inline float round_bf16(float x) { return bf16_to_fp32(fp32_to_bf16(x)); }

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = fp32_to_bf16(v[i]);
  return out;
}

// Bitwise equality (NaN payloads included); reports the first difference.
template <class T>
void expect_bitwise(const std::vector<T>& got, const std::vector<T>& want,
                    const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      ADD_FAILURE() << label << ": first difference at " << i << ": got " << +got[i]
                    << ", want " << +want[i];
      return;
    }
  }
}

// |got - want| <= atol + rtol |want| everywhere; a non-finite got passes only
// when want is the same non-finite class. Prints the worst err/limit ratio.
template <class W>
void expect_close(const std::vector<float>& got, const std::vector<W>& want, double atol,
                  double rtol, const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label;
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = double(want[i]);
    double ratio;
    if (!std::isfinite(g) || !std::isfinite(w)) {
      const bool same = (std::isnan(g) && std::isnan(w)) || g == w;
      ratio = same ? 0.0 : 1e30;
    } else {
      ratio = std::abs(g - w) / (atol + rtol * std::abs(w));
    }
    if (ratio > worst) worst = ratio, at = i;
  }
  EXPECT_LE(worst, 1.0) << label << ": worst err/limit " << worst << " at " << at << ": got "
                        << got[at] << ", want " << double(want[at]);
  if (worst > 0.25) std::printf("[ note ] %s: worst err/limit %.3g\n", label.c_str(), worst);
}

}  // namespace pagoda::gpu::test
