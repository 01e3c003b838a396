#include "gpu/quant_kquants.hpp"

#include <cstring>

#include "gpu/quant_format.hpp"

namespace pagoda::gpu {

namespace {

template <typename Block>
Block load_block(const void* src, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(src) + i * int64_t(sizeof(Block)), sizeof b);
  return b;
}

// Q4_K / Q5_K: the 6-bit scale and min of 32-element sub-block j (0..7).
// Bytes 0..3 hold scales 0..3 in their low 6 bits, bytes 4..7 mins 0..3;
// scales/mins 4..7 keep their low 4 bits in the nibbles of bytes 8..11 and
// their top 2 bits in the top bits of bytes 0..3 / 4..7.
void scale_min_k4(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
    mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// The 2-bit field of element e in a Q2_K / Q3_K qs[64].
int two_bits(const uint8_t* qs, int e) { return qs[32 * (e / 128) + e % 32] >> 2 * ((e % 128) / 32) & 3; }

// The 4-bit field of element e in a Q4_K / Q5_K qs[128].
int four_bits(const uint8_t* qs, int e) { return qs[32 * (e / 64) + e % 32] >> 4 * ((e % 64) / 32) & 15; }

// Q3_K: the signed 6-bit scale of 16-element sub-block i (0..15).
int q3_scale(const uint8_t* s, int i) {
  const int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
  const int hi = s[8 + i % 4] >> 2 * (i / 4) & 3;
  return (lo | hi << 4) - 32;
}

}  // namespace

namespace dequant {

void q2_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kSuperBlock) {
    const auto b = load_block<BlockQ2_K>(src, i);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(b.scales[s] & 0xF);
      const float ml = dmin * static_cast<float>(b.scales[s] >> 4);
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        dst[e] = dl * static_cast<float>(two_bits(b.qs, e)) - ml;
      }
    }
  }
}

void q3_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kSuperBlock) {
    const auto b = load_block<BlockQ3_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(q3_scale(b.scales, s));
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        const int high = b.hmask[e % 32] >> (e / 32) & 1;
        dst[e] = dl * static_cast<float>(two_bits(b.qs, e) - (high ? 0 : 4));
      }
    }
  }
}

void q4_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kSuperBlock) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 8; ++s) {
      int sc = 0, mn = 0;
      scale_min_k4(b.scales, s, sc, mn);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
      for (int e = 32 * s; e < 32 * s + 32; ++e) {
        dst[e] = dl * static_cast<float>(four_bits(b.qs, e)) - ml;
      }
    }
  }
}

void q5_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kSuperBlock) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 8; ++s) {
      int sc = 0, mn = 0;
      scale_min_k4(b.scales, s, sc, mn);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
      for (int e = 32 * s; e < 32 * s + 32; ++e) {
        const int q = four_bits(b.qs, e) | (b.qh[e % 32] >> s & 1) << 4;
        dst[e] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

void q6_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kSuperBlock) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(b.scales[s]);
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        const int h = e / 128, r = e % 128;
        const int lo = b.ql[64 * h + r % 64] >> 4 * (r / 64) & 15;
        const int hi = b.qh[32 * h + r % 32] >> 2 * (r / 32) & 3;
        dst[e] = dl * static_cast<float>((lo | hi << 4) - 32);
      }
    }
  }
}

void iq4_xs(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kSuperBlock) {
    const auto b = load_block<BlockIQ4_XS>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int s = 0; s < 8; ++s) {
      const int lo = b.scales_l[s / 2] >> 4 * (s % 2) & 15;
      const int hi = b.scales_h >> 2 * s & 3;
      const float dl = d * static_cast<float>((lo | hi << 4) - 32);
      for (int j = 0; j < 32; ++j) {
        const int idx = b.qs[16 * s + j % 16] >> 4 * (j / 16) & 15;
        dst[32 * s + j] = dl * static_cast<float>(kIq4Grid[idx]);
      }
    }
  }
}

}  // namespace dequant

namespace {

void q2_k_ints(const BlockQ2_K& b, KQuantInts& o) {
  o.d = b.d, o.dmin = b.dmin;
  for (int s = 0; s < 16; ++s) o.sc[s] = int8_t(b.scales[s] & 0xF), o.mn[s] = int8_t(b.scales[s] >> 4);
  for (int e = 0; e < kSuperBlock; ++e) o.q[e] = uint8_t(two_bits(b.qs, e));
}

void q3_k_ints(const BlockQ3_K& b, KQuantInts& o) {
  o.d = b.d, o.offset = 4;
  for (int s = 0; s < 16; ++s) o.sc[s] = int8_t(q3_scale(b.scales, s));
  for (int e = 0; e < kSuperBlock; ++e) {
    o.q[e] = uint8_t(two_bits(b.qs, e) | (b.hmask[e % 32] >> (e / 32) & 1) << 2);
  }
}

// Q4_K / Q5_K (qh: Q5_K's high bits, nullptr for Q4_K).
void q45_k_ints(uint16_t d, uint16_t dmin, const uint8_t* scales, const uint8_t* qs,
                const uint8_t* qh, KQuantInts& o) {
  o.d = d, o.dmin = dmin;
  for (int s = 0; s < 8; ++s) {
    int sc = 0, mn = 0;
    scale_min_k4(scales, s, sc, mn);
    o.sc[2 * s] = o.sc[2 * s + 1] = int8_t(sc);
    o.mn[2 * s] = o.mn[2 * s + 1] = int8_t(mn);
  }
  for (int e = 0; e < kSuperBlock; ++e) {
    const int hi = qh == nullptr ? 0 : (qh[e % 32] >> (e / 32) & 1) << 4;
    o.q[e] = uint8_t(four_bits(qs, e) | hi);
  }
}

void q6_k_ints(const BlockQ6_K& b, KQuantInts& o) {
  o.d = b.d, o.offset = 32;
  for (int s = 0; s < 16; ++s) o.sc[s] = b.scales[s];
  for (int e = 0; e < kSuperBlock; ++e) {
    const int h = e / 128, r = e % 128;
    const int lo = b.ql[64 * h + r % 64] >> 4 * (r / 64) & 15;
    const int hi = b.qh[32 * h + r % 32] >> 2 * (r / 32) & 3;
    o.q[e] = uint8_t(lo | hi << 4);
  }
}

}  // namespace

void kquant_ints(WeightFormat f, const void* block, KQuantInts& out) {
  out = KQuantInts{};
  switch (f) {
    case WeightFormat::Q2_K: q2_k_ints(load_block<BlockQ2_K>(block, 0), out); return;
    case WeightFormat::Q3_K: q3_k_ints(load_block<BlockQ3_K>(block, 0), out); return;
    case WeightFormat::Q4_K: {
      const auto b = load_block<BlockQ4_K>(block, 0);
      q45_k_ints(b.d, b.dmin, b.scales, b.qs, nullptr, out);
      return;
    }
    case WeightFormat::Q5_K: {
      const auto b = load_block<BlockQ5_K>(block, 0);
      q45_k_ints(b.d, b.dmin, b.scales, b.qs, b.qh, out);
      return;
    }
    case WeightFormat::Q6_K: q6_k_ints(load_block<BlockQ6_K>(block, 0), out); return;
    default: return;
  }
}

}  // namespace pagoda::gpu
