// Block formats of ggml's 256-element "super-block" types: the K-quants
// (Q2_K .. Q6_K) and IQ4_XS. Their dequantizers are in quant_kquants.cpp and
// are reached through the type table (gpu/weight_format.hpp,
// gpu::dequantize_row).
//
// A super-block holds 256 elements in sub-blocks of 16 or 32, each with its
// own small integer scale (and, for Q2_K/Q4_K/Q5_K, minimum) that multiplies
// the fp16 super-block scale d (dmin). Little-endian, no padding; byte for
// byte ggml's block_q2_K ... block_q6_K / block_iq4_xs. Element e (0..255):
//  - Q2_K (84 B): scales[16] (lo nibble: scale, hi: min of sub-block e/16);
//    qs[64]; fp16 d, dmin.  q = qs[32*(e/128) + e%32] >> 2*((e%128)/32) & 3;
//    x = (d*sc) * q - (dmin*mn).
//  - Q3_K (110 B): hmask[32]; qs[64]; scales[12] (16 6-bit scales, stored
//    minus 32: low nibbles in bytes 0..7 (sub-block i<8: byte i lo, i>=8:
//    byte i-8 hi), 2 high bits in bytes 8..11 (byte 8 + i%4, bits 2*(i/4)));
//    fp16 d.  q = (2-bit as in Q2_K) - (bit e/32 of hmask[e%32] ? 0 : 4);
//    x = (d*(sc-32)) * q.
//  - Q4_K (144 B): fp16 d, dmin; scales[12] (8 6-bit scales and 8 6-bit mins
//    of 32-element sub-blocks, ggml's get_scale_min_k4 packing); qs[128].
//    q = qs[32*(e/64) + e%32] >> 4*((e%64)/32) & 15; x = (d*sc)*q - (dmin*mn).
//  - Q5_K (176 B): fp16 d, dmin; scales[12] as Q4_K; qh[32]; qs[128].
//    q = (4-bit as Q4_K) | (bit e/32 of qh[e%32]) << 4; x as Q4_K.
//  - Q6_K (210 B): ql[128]; qh[64]; int8 scales[16] (sub-blocks of 16);
//    fp16 d. With h = e/128, r = e%128: low 4 bits from
//    ql[64*h + r%64] >> 4*(r/64), high 2 from qh[32*h + r%32] >> 2*(r/32);
//    x = (d*sc) * (q - 32).
//  - IQ4_XS (136 B): fp16 d; uint16 scales_h; scales_l[4]; qs[128]. The
//    6-bit scale of sub-block s (32 elements) is (scales_l[s/2] >> 4*(s%2) &
//    15) | (scales_h >> 2s & 3) << 4, minus 32; the 4-bit grid index of
//    element j of s is qs[16s + j%16] >> 4*(j/16) & 15;
//    x = (d*scale) * kIq4Grid[index].
// Products are formed in the order shown (the scale product first), in fp32,
// one rounding each, as the `gguf` package's numpy reference does.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/weight_format.hpp"

namespace pagoda::gpu {

inline constexpr int kSuperBlock = 256;  // ggml's QK_K

struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;  // fp16
};
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;  // fp16
};
struct BlockQ4_K {
  uint16_t d, dmin;  // fp16
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;  // fp16
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // fp16
};
struct BlockIQ4_XS {
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ2_K) == 84 && block_bytes(WeightFormat::Q2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110 && block_bytes(WeightFormat::Q3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && block_bytes(WeightFormat::Q4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && block_bytes(WeightFormat::Q5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && block_bytes(WeightFormat::Q6_K) == 210);
static_assert(sizeof(BlockIQ4_XS) == 136 && block_bytes(WeightFormat::IQ4_XS) == 136);
static_assert(offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ3_K, d) == 108 &&
              offsetof(BlockQ6_K, d) == 208);
// The table's fp16 field offsets are the structs' (checked here, once).
static_assert(traits(WeightFormat::Q2_K).half_at[0] == offsetof(BlockQ2_K, d) &&
              traits(WeightFormat::Q2_K).half_at[1] == offsetof(BlockQ2_K, dmin) &&
              traits(WeightFormat::Q3_K).half_at[0] == offsetof(BlockQ3_K, d) &&
              traits(WeightFormat::Q4_K).half_at[1] == offsetof(BlockQ4_K, dmin) &&
              traits(WeightFormat::Q5_K).half_at[1] == offsetof(BlockQ5_K, dmin) &&
              traits(WeightFormat::Q6_K).half_at[0] == offsetof(BlockQ6_K, d));

// The integer fields of one K-quant super-block (Q2_K .. Q6_K), in the one
// form every K-quant fits: element e (0..255) is
//     x_e = (d·sc[e/16])·(q[e] − offset) − dmin·mn[e/16]
// with q unsigned (Q2_K 0..3, Q3_K 0..7, Q4_K 0..15, Q5_K 0..31, Q6_K
// 0..63), sc and mn per 16-element sub-block (Q4_K / Q5_K repeat their
// 32-element sub-block's pair), offset 32 (Q6_K), 4 (Q3_K) or 0, and dmin
// and mn zero for the types without minima (Q3_K, Q6_K). Ranges: sc in
// [0, 63] (Q4_K, Q5_K), [0, 15] (Q2_K), [-32, 31] (Q3_K), [-128, 127]
// (Q6_K); mn in [0, 63] or [0, 15]. The CPU's packed K-quant tiles are built
// from it (gpu/cpu/quant_packed_kquants.cpp).
struct KQuantInts {
  uint16_t d = 0, dmin = 0;  // fp16 bits
  int32_t offset = 0;
  int8_t sc[16] = {}, mn[16] = {};
  uint8_t q[256] = {};
};

// Decodes `block` (one super-block of format f, any alignment) into out.
// Requires f in {Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}.
void kquant_ints(WeightFormat f, const void* block, KQuantInts& out);

}  // namespace pagoda::gpu
