// The 512-bit body of the packed-layout kernels (gpu/cpu/quant_packed.hpp),
// shared by the AVX-512 VNNI and AVX-512 BW (no VNNI) variants. NOT a normal
// header: each variant's .cpp includes it once, inside its own anonymous
// namespace, after defining
//   PAGODA_SIMD   the function attribute (an AVX-512 F/BW/VL/DQ target)
//   PAGODA_VNNI   1: vpdpbusd; 0: vpmaddubsw + vpmaddwd
// and gets tile_any with packed_tile_scalar's contract.
//
// One zmm holds 4 quants of each of a group's 16 rows, so 4 activation bytes
// broadcast to every lane give 16 rows' partial sums per instruction. The
// exact P_b:
//  - VNNI: 8 vpdpbusd in two chains (low and high nibbles / first and
//    second half of the block), offsets removed in int32 (Q4_0: −8·Σq_a,
//    Q8_0: −128·Σq_a);
//  - BW, Q4: vpmaddubsw(nibbles, activations) for the 8 chunks summed in
//    int16 (|sum| <= 8·2·15·127 = 30480, no saturation), one vpmaddwd;
//  - Q5_0 / Q5_1: the 5-bit v = nibble | plane bit (hibit<J>); VNNI as Q4
//    (Q5_0's offset −16·Σq_a); BW sums 4 chunks per int16 accumulator
//    (<= 4·2·31·127 = 31496) and takes two vpmaddwd;
//  - IQ4_NL / IQ4_XS (fp32 scales): vpshufb of the nibbles in the 16-byte table kIq4GridU8 gives
//    Q8_0's stored form (grid + 128), then Q8_0's path below;
//  - BW, Q8_0: AVX-512 has no vpsignb, so the weight w = byte ^ 0x80 gives
//    |w| (vpabsb) and a mask of w < 0 (vpmovb2m) once per tile; per
//    activation row the broadcast bytes are negated under that mask
//    (masked vpsubb) and vpmaddubsw(|w|, ±a) pairs stay <= 2·128·127 <
//    2^15; vpmaddwd per chunk, summed in int32.
// Then per block and activation row one int->fp32 convert, one scale
// product and one FMA (Q4_1 / Q5_1: a second FMA for the offset term): the scalar
// kernel's fp32 steps in its order, so the bits are the same.
// Register tiles: one group × up to eight activation rows (one row: decode;
// the first pass over a group prefetches the next group's tiles into L2).

template <WeightFormat F>
constexpr int64_t kHeader = packed_header_bytes(F);

PAGODA_SIMD inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The 8 weight vectors of a tile: Q4: low nibbles of chunks 0..3 (elements
// 0..15), then high nibbles (16..31); Q8_0: chunks 0..7, as stored (q + 128)
// for VNNI, as |q| plus the mask of negative q for the BW variant.
struct ZWeights {
  __m512i v[8];
  __mmask64 neg[8];  // BW Q8_0 only
};

// Chunk c of the byte form (q + 128) into w: as it is for VNNI, as |q| plus
// the mask of negative q for the BW variant.
PAGODA_SIMD inline void set_byte_form(__m512i x, ZWeights& w, int c) {
#if PAGODA_VNNI
  w.v[c] = x;
#else
  const __m512i s = _mm512_xor_si512(x, _mm512_set1_epi8(-128));
  w.v[c] = _mm512_abs_epi8(s);  // |-128| = 0x80, read as unsigned 128
  w.neg[c] = _mm512_movepi8_mask(s);
#endif
}

// The 5th bits of weight vector J (elements 4J + t) as 0x10 in each byte:
// bit J of the plane byte moved to bit 4 by one 16-bit shift (a shift of at
// most 4 left or 3 right keeps bit 4 of each byte inside its byte).
template <int J>
PAGODA_SIMD inline __m512i hibit(__m512i plane) {
  const __m512i m = _mm512_set1_epi8(0x10);
  if constexpr (J < 4) return _mm512_and_si512(_mm512_slli_epi16(plane, 4 - J), m);
  if constexpr (J == 4) return _mm512_and_si512(plane, m);
  if constexpr (J > 4) return _mm512_and_si512(_mm512_srli_epi16(plane, J - 4), m);
}

// Chunk C's two weight vectors of a Q5 tile: nibbles | 5th bits.
template <int C>
PAGODA_SIMD inline void unpack5(const uint8_t* q, __m512i plane, ZWeights& w) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i x = _mm512_loadu_si512(q + 64 * C);
  w.v[C] = _mm512_or_si512(_mm512_and_si512(x, mask), hibit<C>(plane));
  w.v[C + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x, 4), mask), hibit<C + 4>(plane));
}

template <WeightFormat F>
PAGODA_SIMD inline void unpack(const uint8_t* q, ZWeights& w) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  if constexpr (F == WeightFormat::Q8_0) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) set_byte_form(_mm512_loadu_si512(q + 64 * c), w, c);
  } else if constexpr (F == WeightFormat::IQ4_NL || F == WeightFormat::IQ4_XS) {
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4GridU8)));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i x = _mm512_loadu_si512(q + 64 * c);
      set_byte_form(_mm512_shuffle_epi8(lut, _mm512_and_si512(x, mask)), w, c);
      set_byte_form(_mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(x, 4), mask)), w,
                    c + 4);
    }
  } else if constexpr (packed_five_bit(F)) {
    const __m512i plane = _mm512_loadu_si512(q + 4 * 64);
    unpack5<0>(q, plane, w);
    unpack5<1>(q, plane, w);
    unpack5<2>(q, plane, w);
    unpack5<3>(q, plane, w);
  } else {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i x = _mm512_loadu_si512(q + 64 * c);
      w.v[c] = _mm512_and_si512(x, mask);
      w.v[c + 4] = _mm512_and_si512(_mm512_srli_epi16(x, 4), mask);
    }
  }
}

// Exact P_b of 16 rows (int32 lanes) with activation block a. kOneChain
// (VNNI): one vpdpbusd chain of 8 instead of two of 4 and their add; for the
// 16-row tiles, whose 16 chains hide the latency (int32 sums are exact, so
// the order does not change the result); with 8 rows or fewer, two chains.
template <WeightFormat F, bool kOneChain = false>
PAGODA_SIMD inline __m512i partial(const ZWeights& w, const ActBlock& a) {
#if PAGODA_VNNI
  __m512i p0 = _mm512_setzero_si512();
  if constexpr (F == WeightFormat::Q4_0) p0 = _mm512_set1_epi32(-8 * a.sum);
  if constexpr (F == WeightFormat::Q5_0) p0 = _mm512_set1_epi32(-16 * a.sum);
  if constexpr (packed_byte_form(F)) p0 = _mm512_set1_epi32(-128 * a.sum);
  if constexpr (kOneChain) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      p0 = _mm512_dpbusd_epi32(p0, w.v[c], bcast4(a.qs + 4 * c));
      p0 = _mm512_dpbusd_epi32(p0, w.v[c + 4], bcast4(a.qs + 16 + 4 * c));
    }
    return p0;
  }
  __m512i p1 = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    p0 = _mm512_dpbusd_epi32(p0, w.v[c], bcast4(a.qs + 4 * c));
    p1 = _mm512_dpbusd_epi32(p1, w.v[c + 4], bcast4(a.qs + 16 + 4 * c));
  }
  return _mm512_add_epi32(p0, p1);
#else
  const __m512i ones = _mm512_set1_epi16(1);
  if constexpr (packed_byte_form(F)) {
    // |w|·(a negated where w < 0): pairs <= 2·128·127 < 2^15.
    __m512i p = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m512i x = bcast4(a.qs + 4 * c);
      const __m512i s = _mm512_mask_sub_epi8(x, w.neg[c], _mm512_setzero_si512(), x);
      p = _mm512_add_epi32(p, _mm512_madd_epi16(_mm512_maddubs_epi16(w.v[c], s), ones));
    }
    return p;
  } else if constexpr (packed_five_bit(F)) {
    // v·a pairs <= 2·31·127 = 7874; four chunks' sums <= 31496 fit int16.
    __m512i lo16 = _mm512_setzero_si512(), hi16 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      lo16 = _mm512_add_epi16(lo16, _mm512_maddubs_epi16(w.v[c], bcast4(a.qs + 4 * c)));
      hi16 = _mm512_add_epi16(hi16, _mm512_maddubs_epi16(w.v[c + 4], bcast4(a.qs + 16 + 4 * c)));
    }
    const __m512i p = _mm512_add_epi32(_mm512_madd_epi16(lo16, ones), _mm512_madd_epi16(hi16, ones));
    if constexpr (F == WeightFormat::Q5_0) return _mm512_sub_epi32(p, _mm512_set1_epi32(16 * a.sum));
    return p;
  } else {
    // nibble·a pairs <= 2·15·127; the 8 chunk sums <= 30480 fit int16.
    __m512i s16 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(w.v[c], bcast4(a.qs + 4 * c)));
      s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(w.v[c + 4], bcast4(a.qs + 16 + 4 * c)));
    }
    const __m512i p = _mm512_madd_epi16(s16, ones);
    if constexpr (F == WeightFormat::Q4_0) return _mm512_sub_epi32(p, _mm512_set1_epi32(8 * a.sum));
    return p;
  }
#endif
}

// out[i·MR + r] = the 16 outputs of group i (tiles at g + i·gstride) for
// activation row a[r], over nb blocks. pf (nullptr: none): tiles to
// prefetch into L2 along the way, block for block (the group the caller
// reads next), so its memory traffic overlaps this call's arithmetic.
template <WeightFormat F, int NG, int MR>
PAGODA_SIMD inline void micro(const uint8_t* g, int64_t gstride, const ActBlock* const* a,
                              int64_t nb, __m512* out, const uint8_t* pf) {
  constexpr int64_t T = packed_tile_bytes(F);
  constexpr bool kOffset = packed_has_offset(F);
  __m512 acc[NG][MR], macc[NG][MR];
#pragma GCC unroll 16
  for (int i = 0; i < NG * MR; ++i) acc[i / MR][i % MR] = macc[i / MR][i % MR] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (pf != nullptr) {
#pragma GCC unroll 9
      for (int64_t off = 0; off < T; off += 64) _mm_prefetch(reinterpret_cast<const char*>(pf + b * T + off), _MM_HINT_T1);
    }
#pragma GCC unroll 2
    for (int i = 0; i < NG; ++i) {
      const uint8_t* t = g + i * gstride + b * T;
      const __m512 dw = packed_f32_scales(F)
                            ? _mm512_loadu_ps(t)
                            : _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t)));
      __m512 mw = _mm512_setzero_ps();
      if constexpr (kOffset) {
        mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + 32)));
      }
      ZWeights v;
      unpack<F>(t + kHeader<F>, v);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const ActBlock& ab = a[r][b];
        const __m512 p = _mm512_cvtepi32_ps(partial<F, (MR > 8)>(v, ab));
        acc[i][r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(ab.d)), p, acc[i][r]);
        if constexpr (kOffset) macc[i][r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(ab.s), macc[i][r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NG * MR; ++i) {
    out[i] = kOffset ? _mm512_add_ps(acc[i / MR][i % MR], macc[i / MR][i % MR])
                     : acc[i / MR][i % MR];
  }
}

#include "gpu/cpu/quant_packed_kq_zmm.hpp"

// Stores the 16 outputs of group g for row m (masked for the last, partial group).
PAGODA_SIMD inline void store(const LinearWeight& w, float* y, int64_t m, int64_t g, __m512 v) {
  float* dst = y + m * w.n + g * kPackRows;
  const int64_t valid = std::min<int64_t>(kPackRows, w.n - g * kPackRows);
  if (valid == kPackRows) {
    _mm512_storeu_ps(dst, v);
  } else {
    _mm512_mask_storeu_ps(dst, __mmask16((1u << valid) - 1), v);
  }
}

// Groups g .. g+NG-1 for rows m .. m+MR-1; prefetching group g + NG when
// `prefetch` and it exists.
template <WeightFormat F, int NG, int MR>
PAGODA_SIMD inline void run(const LinearWeight& w, const ActBlock* const* a, int64_t m, int64_t g,
                            float* y, bool prefetch = false) {
  const int64_t nb = w.k / kQuantBlock, gstride = packed_group_bytes(F, w.k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const bool pf = prefetch && (g + NG) * kPackRows < w.n;
  __m512 out[NG * MR];
  const uint8_t* next = pf ? base + (g + NG) * gstride : nullptr;
  // Q4_K and Q5_K blocks of 8 rows (prefill) through kmicro_wide too: no
  // minimum accumulators in the pass, so the 8 chains interleave.
  constexpr bool kWide8 = PAGODA_VNNI && MR == 8 && (F == WeightFormat::Q4_K || F == WeightFormat::Q5_K);
  if constexpr (packed_kquant(F) && (MR > 8 || kWide8)) {
#if PAGODA_VNNI
    static_assert(NG == 1 && (MR == 16 || MR == 8));
    kmicro_wide<F, MR>(base + g * gstride, a, nb, out, next);
#endif
  } else if constexpr (packed_kquant(F)) {
    kmicro<F, NG, MR>(base + g * gstride, gstride, a, nb, out, next);
  } else {
    micro<F, NG, MR>(base + g * gstride, gstride, a, nb, out, next);
  }
  for (int i = 0; i < NG; ++i) {
    for (int r = 0; r < MR; ++r) store(w, y, m + r, g + i, out[i * MR + r]);
  }
}

template <WeightFormat F>
PAGODA_SIMD void tile(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                      int64_t m1, int64_t g0, int64_t g1) {
  const int64_t nb = w.k / kQuantBlock;
  // Decode: one group per pass, prefetching the next group's tiles into L2
  // as the batches do. Two groups per pass without a prefetch took 15-26%
  // more CPU time per decode step on a Zen 4 (Q4_0, Q4_K, Q5_K, Q6_K; Q8_0
  // equal), with the same wall time at 2 threads (bandwidth-bound there):
  // bench_kernels --llama1b --m 1 --isa avx512vnni, cpu_ms_1t.
  if (m1 - m0 == 1) {
    const ActBlock* a[1] = {act + m0 * nb};
    for (int64_t g = g0; g < g1; ++g) run<F, 1, 1>(w, a, m0, g, y, true);
    return;
  }
  // Batches: the group's tiles stay in L1/L2 while every row passes over
  // them; the first pass prefetches the next group's tiles into L2. With
  // VNNI and one accumulator per row (no offset or minimum term), a decode
  // batch of up to 32 rows runs in passes of 16: the tile is unpacked once
  // for 16 rows instead of twice (16 accumulators + 8 weight vectors fit the
  // 32 zmm registers). Longer prefill blocks measured faster in passes of 8
  // (M = 512: 1457 vs 1623 ms for a 1B prompt of 512 tokens).
  constexpr int kMR = 8;
  // K-quants through kmicro_wide: all but Q2_K (a scale and a minimum per 16
  // elements: too many live registers for 16 rows).
  constexpr bool kWideK = packed_kquant(F) && F != WeightFormat::Q2_K;
  constexpr bool kWide = PAGODA_VNNI && ((!packed_has_offset(F) && !packed_kquant(F)) || kWideK);
  // K-quant prefill blocks run in 16-row passes too where the 16 rows'
  // activation blocks (16 · K/32 · 48 B) fit a 48 KiB L1, K <= 2048
  // (bench_kernels --llama1b --format q4_k --m 512: qkv and gate_up 2.5-3%
  // faster than 8-row passes; down, K = 8192, 4-7% slower).
  const bool wide_prefill = kWideK && w.k <= 2048;
  for (int64_t g = g0; g < g1; ++g) {
    int64_t m = m0;
    if constexpr (kWide) {
      for (; m + 16 <= m1 && (m1 - m0 <= 32 || wide_prefill); m += 16) {
        const ActBlock* a[16];
        for (int r = 0; r < 16; ++r) a[r] = act + (m + r) * nb;
        run<F, 1, 16>(w, a, m, g, y, m == m0);
      }
    }
    for (; m < m1; m += kMR) {
      const ActBlock* a[kMR];
      const int rows = int(std::min<int64_t>(kMR, m1 - m));
      for (int r = 0; r < kMR; ++r) a[r] = act + (m + std::min(r, rows - 1)) * nb;
      const bool pf = m == m0;
      switch (rows) {
        case 8: run<F, 1, 8>(w, a, m, g, y, pf); break;
        case 7: run<F, 1, 7>(w, a, m, g, y, pf); break;
        case 6: run<F, 1, 6>(w, a, m, g, y, pf); break;
        case 5: run<F, 1, 5>(w, a, m, g, y, pf); break;
        case 4: run<F, 1, 4>(w, a, m, g, y, pf); break;
        case 3: run<F, 1, 3>(w, a, m, g, y, pf); break;
        case 2: run<F, 1, 2>(w, a, m, g, y, pf); break;
        default: run<F, 1, 1>(w, a, m, g, y, pf); break;
      }
    }
  }
}

PAGODA_SIMD inline void tile_any(const LinearWeight& w, const ActBlock* act, float* y,
                                 int64_t m0, int64_t m1, int64_t g0, int64_t g1) {
  switch (w.format) {
    case WeightFormat::Q8_0: tile<WeightFormat::Q8_0>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q4_0: tile<WeightFormat::Q4_0>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q4_1: tile<WeightFormat::Q4_1>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q5_0: tile<WeightFormat::Q5_0>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q5_1: tile<WeightFormat::Q5_1>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::IQ4_NL: tile<WeightFormat::IQ4_NL>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::IQ4_XS: tile<WeightFormat::IQ4_XS>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q2_K: tile<WeightFormat::Q2_K>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q3_K: tile<WeightFormat::Q3_K>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q4_K: tile<WeightFormat::Q4_K>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q5_K: tile<WeightFormat::Q5_K>(w, act, y, m0, m1, g0, g1); return;
    case WeightFormat::Q6_K: tile<WeightFormat::Q6_K>(w, act, y, m0, m1, g0, g1); return;
    default: return;
  }
}
