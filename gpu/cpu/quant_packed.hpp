// The CPU's packed layout of block-quantized weights (WeightLayout::kPacked16)
// and the int8 matmul kernels that read it.
//
// Why: in the file's row layout a SIMD kernel gets one row's 32 quants per
// vector and has to reduce them across lanes for every (row, block). Packed,
// one vector holds 4 consecutive quants of each of 16 rows, so vpdpbusd with
// 4 activation bytes broadcast to every lane yields 16 rows' partial sums at
// once, and a block's dot products for 16 rows are 8 such instructions plus
// one scale-and-accumulate — several times fewer instructions per weight byte.
//
// Layout. Rows are grouped by 16 (group g = rows 16g..16g+15; the last group
// is padded with zero rows), group g at g·packed_group_bytes(F, K). Per group
// and per 32-element block b, one tile of packed_tile_bytes(F) bytes at
// packed_tile_at(F, b) in the group — b·tile_bytes but for the K-quants,
// whose super-blocks carry a shared header (below). The tile of the formats
// with 32-element blocks:
//  - d[16]: the rows' fp16 scales (32 B); Q4_1 / Q5_1 then m[16]: fp16
//    offsets (32 B); IQ4_XS: fp32 d[16] (64 B), each 32-element sub-block's
//    scale d·(ls − 32) computed at pack time (exact in fp32) —
//    packed_header_bytes(F) in all;
//  - quants in 64-byte chunks; chunk c holds, for row r = 0..15, 4 bytes at
//    64c + 4r + t (t = 0..3):
//      Q4_0 / Q4_1 / IQ4_NL / IQ4_XS / Q5_0 / Q5_1 (4 chunks): the file's
//        byte qs[4c + t] of the (sub-)block — low nibble is element 4c + t,
//        high nibble element 16 + 4c + t (IQ4_*: an index into kIq4Grid);
//      Q8_0 (8 chunks): element 4c + t as an unsigned byte q + 128;
//  - Q5_0 / Q5_1 only: one more 64-byte chunk, the high-bit plane: byte
//    4r + t holds in bit j the 5th bit of element 4j + t (j = 0..7), so the
//    bit of every lane's element 4j + t is one 16-bit shift and a mask away.
// Memory: Q4_0 / IQ4_NL 288 B, Q4_1 320 B, Q5_0 352 B, Q5_1 384 B, Q8_0
// 544 B per 16×32 weights — exactly the file's bytes (no extra cost);
// IQ4_XS 320 B against the file's 272 B (+18%: fp32 per-32 scales instead
// of a shared fp16 and 6-bit integers; still 0.59x of Q8_0's 544 B).
//
// The math (every ISA variant gives the same bits as the scalar one): for
// weight row w and activation row a (quantize_activations' ActBlocks), per
// block b the exact integer P_b = Σ_j q_w[j]·q_a[j] with q_w the signed
// integer the format multiplies by d (Q4_0: nibble − 8; Q8_0: the file's
// int8; IQ4_NL / IQ4_XS: kIq4Grid[nibble]; Q5_0: v − 16 for the 5-bit v) or, for
// the offset formats, the unsigned one (Q4_1: nibble; Q5_1: v); then in
// block order
//     acc = fma(fp32(d_w·d_a), fp32(P_b), acc);   offset: macc = fma(m_w, s_a, macc)
// and y = acc + macc for Q4_1 / Q5_1, y = acc otherwise. The variants get
// P_b through unsigned×signed byte products with offsets removed exactly in
// int32 (Q4_0: Σ nib·q_a − 8·Σq_a; Q5_0: Σ v·q_a − 16·Σq_a; Q8_0 and IQ4_NL
// / IQ4_XS (grid + 128 from a 16-byte table lookup, pshufb): Σ (q+128)·q_a −
// 128·Σq_a) or, on AVX2 and AVX-512 BW, through pmaddubsw/pmaddwd. Error
// bounds are those of quant_matmul.hpp (the same quantized terms, summed in
// another order).
//
// Thread-safety: pure functions over caller-owned memory; packed_matmul's
// threading is quant_matmul's (one call at a time per pool and scratch).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/result.hpp"
#include "gpu/weight_format.hpp"

namespace pagoda::gpu::cpu {

inline constexpr int64_t kPackRows = 16;

// Bytes of one (16-row group, block) tile; 0 for a format that cannot be
// packed. K-quants: the tile without its super-block's fp16 d and dmin
// (packed_k_super_header; where tiles lie: packed_tile_at).
constexpr int64_t packed_tile_bytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::Q4_0:
    case WeightFormat::IQ4_NL: return 32 + 4 * 64;
    case WeightFormat::Q4_1:
    case WeightFormat::IQ4_XS: return 64 + 4 * 64;
    case WeightFormat::Q5_0: return 32 + 5 * 64;
    case WeightFormat::Q5_1: return 64 + 5 * 64;
    case WeightFormat::Q8_0: return 32 + 8 * 64;
    case WeightFormat::Q2_K: return 64 + 2 * 64;
    case WeightFormat::Q3_K: return 32 + 3 * 64;
    case WeightFormat::Q4_K: return 32 + 4 * 64;
    case WeightFormat::Q5_K: return 32 + 5 * 64;
    case WeightFormat::Q6_K: return 32 + 6 * 64;
    default: return 0;
  }
}

// ---- K-quant tiles (Q2_K .. Q6_K; gpu/cpu/quant_packed_kquants.cpp) ----
// A tile holds 32 elements (sub-block b % 8 of super-block b / 8) of 16 rows
// in the form of gpu::KQuantInts (gpu/quant_kquants.hpp):
//   x = (d·sc)·(q − offset) − dmin·mn, sc and mn per 16 elements.
// d and dmin are per super-block, so a group is, for each super-block s =
// 0 .. K/256 − 1 in order, a header of packed_k_super_header(F) bytes —
// fp16 d[16] (the rows'), with minima (Q2_K, Q4_K, Q5_K) then fp16
// dmin[16] — followed by the super-block's 8 tiles. A tile: int8 sc — per
// row one (Q4_K, Q5_K: 32-element sub-blocks) or two, lo[16] for elements
// 0..15 then hi[16] (Q2_K, Q3_K, Q6_K) — and int8 mn likewise; then the
// quants, unsigned q in bit planes of 64-byte chunks (byte 4r + t of a chunk
// belongs to row r and elements ≡ t mod 4; weight vector J = elements 4J + t):
//  - low 4 bits (Q4_K, Q5_K, Q6_K): the nibble chunks of Q4_0 (chunk c: low
//    nibble element 4c + t, high nibble element 16 + 4c + t);
//  - low 2 bits (Q2_K, Q3_K): 2 chunks; chunk c bits 2k..2k+1: vector 4c + k;
//  - then bit 4 (Q5_K) / bit 2 (Q3_K): one plane, bit J: vector J (Q5_0's);
//  - then bits 4..5 (Q6_K): 2 chunks laid out as the low 2 bits.
// Memory per 16×32 weights, the header's share included (file; Q8_0 route
// 544 B): Q4_K 296 B (288 B, +3%), Q5_K 360 B (352 B, +2%), Q6_K 420 B (420
// B, the same), Q3_K 228 B (220 B, +4%), Q2_K 200 B (168 B, +19%: its 4-bit
// scales and minima stored as int8).
// The math per tile, row and activation block a, in block order (P_lo /
// P_hi = Σ q·q_a over elements 0..15 / 16..31, exact int32; S_lo / S_hi the
// same sums of q_a alone, a.sum_lo and a.sum − a.sum_lo; dsc = fp32(d)·sc
// and msc = fp32(dmin)·mn, exact: 11 × 8 significant bits at most):
//   Q4_K, Q5_K:  acc = fma(dsc·d_a, fp32(P_lo + P_hi), acc);  macc = fma(msc, s_a, macc)
//   Q2_K, Q3_K, Q6_K, for h = lo then hi:
//                acc = fma(dsc_h·d_a, fp32(P_h − offset·S_h), acc)
//                Q2_K: macc = fma(msc_h, fp32(d_a·S_h), macc)
// then y = acc − macc (y = acc without minima). The conversions are exact
// (|P| < 2^24). Error bounds: quant_matmul.hpp's, with twice the
// accumulation steps for the 16-element sub-blocks.

constexpr bool packed_kquant(WeightFormat f) {
  return f == WeightFormat::Q2_K || f == WeightFormat::Q3_K || f == WeightFormat::Q4_K ||
         f == WeightFormat::Q5_K || f == WeightFormat::Q6_K;
}
// Whether the K-quant's scales are per 16 elements (two per tile row).
constexpr bool packed_k_sub16(WeightFormat f) {
  return f == WeightFormat::Q2_K || f == WeightFormat::Q3_K || f == WeightFormat::Q6_K;
}
constexpr bool packed_k_min(WeightFormat f) {
  return f == WeightFormat::Q2_K || f == WeightFormat::Q4_K || f == WeightFormat::Q5_K;
}
constexpr int packed_k_low_bits(WeightFormat f) {
  return f == WeightFormat::Q2_K || f == WeightFormat::Q3_K ? 2 : 4;
}
constexpr int packed_k_high_bits(WeightFormat f) {
  return f == WeightFormat::Q6_K ? 2 : f == WeightFormat::Q3_K || f == WeightFormat::Q5_K ? 1 : 0;
}
constexpr int packed_k_offset(WeightFormat f) {
  return f == WeightFormat::Q6_K ? 32 : f == WeightFormat::Q3_K ? 4 : 0;
}
// Offsets in a tile: the int8 scales, the int8 minima, the quants (header).
constexpr int64_t packed_k_scale_at(WeightFormat) { return 0; }
constexpr int64_t packed_k_min_at(WeightFormat f) {
  return packed_k_scale_at(f) + (packed_k_sub16(f) ? 32 : 16);
}
constexpr int64_t packed_k_header(WeightFormat f) {
  return packed_k_min(f) ? packed_k_min_at(f) + (packed_k_sub16(f) ? 32 : 16)
                         : packed_k_min_at(f);
}
// Where the high-bit planes start (after the low bits' chunks).
constexpr int64_t packed_k_high_at(WeightFormat f) {
  return packed_k_header(f) + 64 * packed_k_low_bits(f);
}
static_assert(packed_k_high_at(WeightFormat::Q6_K) + 128 == packed_tile_bytes(WeightFormat::Q6_K) &&
              packed_k_high_at(WeightFormat::Q5_K) + 64 == packed_tile_bytes(WeightFormat::Q5_K) &&
              packed_k_high_at(WeightFormat::Q3_K) + 64 == packed_tile_bytes(WeightFormat::Q3_K) &&
              packed_k_high_at(WeightFormat::Q4_K) == packed_tile_bytes(WeightFormat::Q4_K) &&
              packed_k_high_at(WeightFormat::Q2_K) == packed_tile_bytes(WeightFormat::Q2_K));

// A super-block's header: fp16 d[16], with minima then fp16 dmin[16] (at +32).
constexpr int64_t packed_k_super_header(WeightFormat f) { return packed_k_min(f) ? 64 : 32; }
// Bytes of a super-block in a group: its header and its 8 tiles.
constexpr int64_t packed_k_super_bytes(WeightFormat f) {
  return packed_k_super_header(f) + 8 * packed_tile_bytes(f);
}
// Where, in a group, the header of block b's super-block starts (K-quants).
constexpr int64_t packed_k_super_at(WeightFormat f, int64_t b) {
  return b / 8 * packed_k_super_bytes(f);
}
// Where, in a group, block b's tile starts (any packable format).
constexpr int64_t packed_tile_at(WeightFormat f, int64_t b) {
  if (!packed_kquant(f)) return b * packed_tile_bytes(f);
  return packed_k_super_at(f, b) + packed_k_super_header(f) + b % 8 * packed_tile_bytes(f);
}
// Bytes of one 16-row group of a weight with k columns (k % 32 == 0; K-quants,
// IQ4_XS: k % 256 == 0).
constexpr int64_t packed_group_bytes(WeightFormat f, int64_t k) {
  if (packed_kquant(f)) return k / 256 * packed_k_super_bytes(f);
  return k / 32 * packed_tile_bytes(f);
}
static_assert(packed_k_super_bytes(WeightFormat::Q4_K) == 8 * 296 &&
              packed_k_super_bytes(WeightFormat::Q5_K) == 8 * 360 &&
              packed_k_super_bytes(WeightFormat::Q6_K) == 8 * 420 &&
              packed_k_super_bytes(WeightFormat::Q3_K) == 8 * 228 &&
              packed_k_super_bytes(WeightFormat::Q2_K) == 8 * 200);

// Whether a tile carries a Q5 high-bit plane (Q5_0, Q5_1).
constexpr bool packed_five_bit(WeightFormat f) {
  return f == WeightFormat::Q5_0 || f == WeightFormat::Q5_1;
}

// Whether the kernels read the weight as unsigned bytes q + 128: Q8_0's
// stored bytes, IQ4's codebook values after the nibble lookup.
constexpr bool packed_byte_form(WeightFormat f) {
  return f == WeightFormat::Q8_0 || f == WeightFormat::IQ4_NL || f == WeightFormat::IQ4_XS;
}

// Whether the format adds a per-block offset m (the macc term).
constexpr bool packed_has_offset(WeightFormat f) {
  return f == WeightFormat::Q4_1 || f == WeightFormat::Q5_1;
}

// Whether the tile's scales are fp32 (IQ4_XS's per-32 sub-block scales,
// d·(ls − 32): an fp16 times a 6-bit integer, exact in fp32) rather than fp16.
constexpr bool packed_f32_scales(WeightFormat f) { return f == WeightFormat::IQ4_XS; }

// Bytes before a tile's quants: the scales, and the offsets.
constexpr int64_t packed_header_bytes(WeightFormat f) {
  if (packed_kquant(f)) return packed_k_header(f);
  return packed_has_offset(f) || packed_f32_scales(f) ? 64 : 32;
}

// Where a Q5 tile's high-bit plane starts (after the 4 nibble chunks).
constexpr int64_t packed_hibit_offset(WeightFormat f) { return packed_header_bytes(f) + 4 * 64; }

// The packed kernels' tables: kIq4Grid[i] + 128 as bytes (IQ4_NL, VNNI form).
alignas(16) inline constexpr uint8_t kIq4GridU8[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                       129, 141, 153, 166, 181, 197, 217, 241};

// Bytes of W[n, k] packed (k % block_elems == 0; n rounded up to a multiple of 16).
constexpr int64_t packed_bytes(WeightFormat f, int64_t n, int64_t k) {
  return (n + kPackRows - 1) / kPackRows * packed_group_bytes(f, k);
}

// Packs a kRows weight (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: k % 32 == 0;
// IQ4_XS, Q2_K .. Q6_K: k % 256 == 0) into `out`
// (resized to packed_bytes) and returns the kPacked16 view of it (valid while
// `out` lives and is not resized). An Error for another format or layout.
Result<LinearWeight> pack_weight(const LinearWeight& w, std::vector<uint8_t>& out);

// The split of half_matmul and of quant_matmul's single-row case (its
// batches split over columns only, quant_matmul.cpp): tasks of 64 rows of x × `per_task`
// 16-row groups of W on `pool`; fn(m0, m1, g0, g1) per task (any callable,
// not copied). Runs on the caller and the pool's workers.
template <class F>
void for_each_group_tile(ThreadPool& pool, int64_t M, int64_t groups, int64_t per_task,
                         const F& fn) {
  constexpr int64_t kTileM = 64;
  const int64_t tasks_g = (groups + per_task - 1) / per_task;
  const int64_t tasks = (M + kTileM - 1) / kTileM * tasks_g;
  pool.parallel_for(size_t(tasks), [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const int64_t m0 = int64_t(t) / tasks_g * kTileM, g0 = int64_t(t) % tasks_g * per_task;
      fn(m0, m0 + kTileM < M ? m0 + kTileM : M, g0, g0 + per_task < groups ? g0 + per_task : groups);
    }
  });
}

// Whether loaders should pack (default yes; PAGODA_CPU_PACKED=0 keeps the
// file's row layout, for comparisons). Read once; thread-safe.
bool packed_layout_enabled();

namespace detail {

// Kernels: y[m, n] for m in [m0, m1) and the rows n of groups [g0, g1) that
// are < w.n; act is [M, K/32], y is [M, w.n]. w is kPacked16.
using PackedTileFn = void (*)(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                              int64_t m1, int64_t g0, int64_t g1);
void packed_tile_scalar(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                        int64_t m1, int64_t g0, int64_t g1);
void packed_tile_avx2(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                      int64_t m1, int64_t g0, int64_t g1);
void packed_tile_avxvnni(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                         int64_t m1, int64_t g0, int64_t g1);
void packed_tile_avx512bw(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                          int64_t m1, int64_t g0, int64_t g1);
void packed_tile_avx512vnni(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                            int64_t m1, int64_t g0, int64_t g1);

PackedTileFn packed_tile_kernel(QuantIsa isa);

// K-quants (quant_packed_kquants.cpp): packs the kRows K-quant weight w into
// out (packed_bytes long, zeroed by the caller), and the scalar kernel's dot
// product of row r of the group at `group` (nb blocks, nb % 8 == 0) with the
// activation row a [nb].
void pack_kquant(const LinearWeight& w, uint8_t* out);
float packed_kquant_dot(WeightFormat f, const uint8_t* group, int64_t nb, int r,
                        const ActBlock* a);

}  // namespace detail

}  // namespace pagoda::gpu::cpu
