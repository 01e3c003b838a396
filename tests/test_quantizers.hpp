// Simple fp32 -> block quantizers for tests (row-major [n] floats, n % 32 ==
// 0): Q5_0, Q5_1 and IQ4_NL, written from the block layouts of
// gpu/quant_format.hpp. They round to the nearest level of a max-abs (or
// min/max) scale; they are not llama.cpp's search-based quantizers, only a
// way to put the tiny test models' real weights into these formats.
// Header-only, pure.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/quant_format.hpp"

namespace pagoda::test {

inline void put_half(std::vector<uint8_t>& out, float v) {
  const uint16_t h = gpu::fp32_to_fp16(v);
  out.push_back(uint8_t(h & 0xFF));
  out.push_back(uint8_t(h >> 8));
}

// 5-bit values v[32] (0..31) as Q5_x's qh (4 bytes) and qs (16 bytes).
inline void put_q5_bits(std::vector<uint8_t>& out, const int* v) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= uint32_t(v[j] >> 4 & 1) << j;
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(qh >> (8 * i)));
  for (int j = 0; j < 16; ++j) out.push_back(uint8_t((v[j] & 0xF) | (v[j + 16] & 0xF) << 4));
}

// Q5_0: x ~ (v - 16) * d with d = max|x| / 15.
inline std::vector<uint8_t> quantize_q5_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 15.0f;
    int v[32];
    for (size_t j = 0; j < 32; ++j) {
      v[j] = d == 0 ? 16 : std::clamp(int(std::lround(x[b + j] / d)) + 16, 0, 31);
    }
    put_half(out, d);
    put_q5_bits(out, v);
  }
  return out;
}

// Q5_1: x ~ v * d + m with m = min x, d = (max x - min x) / 31.
inline std::vector<uint8_t> quantize_q5_1(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    const auto [lo, hi] = std::minmax_element(x.begin() + long(b), x.begin() + long(b) + 32);
    const float m = *lo, d = (*hi - *lo) / 31.0f;
    int v[32];
    for (size_t j = 0; j < 32; ++j) {
      v[j] = d == 0 ? 0 : std::clamp(int(std::lround((x[b + j] - m) / d)), 0, 31);
    }
    put_half(out, d);
    put_half(out, m);
    put_q5_bits(out, v);
  }
  return out;
}

// IQ4_NL: x ~ d * grid[i], d = max|x| / 127, i the nearest grid level.
inline std::vector<uint8_t> quantize_iq4_nl(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f;
    int v[32];
    for (size_t j = 0; j < 32; ++j) {
      const float t = d == 0 ? 0 : x[b + j] / d;
      int best = 0;
      for (int i = 1; i < 16; ++i) {
        if (std::fabs(t - gpu::kIq4Grid[i]) < std::fabs(t - gpu::kIq4Grid[best])) best = i;
      }
      v[j] = best;
    }
    put_half(out, d);
    for (int j = 0; j < 16; ++j) out.push_back(uint8_t(v[j] | v[j + 16] << 4));
  }
  return out;
}

}  // namespace pagoda::test
