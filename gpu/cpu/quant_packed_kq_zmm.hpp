// The 512-bit body of the packed K-quant kernels (Q2_K .. Q6_K; layout and
// math in gpu/cpu/quant_packed.hpp). NOT a normal header: included once by
// quant_packed_zmm.hpp (inside a variant's anonymous namespace, after its
// bcast4 and PAGODA_VNNI) and gives kmicro, micro's counterpart.
//
// Per tile: the unsigned q of weight vector J (elements 4J + t of the 16
// rows) from the low-bit chunks and the high-bit planes, each part one
// 16-bit shift and a byte mask (kbits); then per activation row the exact
// P_lo / P_hi (elements 0..15 / 16..31):
//  - VNNI: 4 vpdpbusd each;
//  - BW: vpmaddubsw (pairs <= 2·q_max·127) summed in int16 over 4 vectors
//    (<= 31496 for Q5_K's q <= 31) or 2 (Q6_K's q <= 63: <= 32004), then
//    vpmaddwd into int32;
// then the scalar kernel's fp32 steps in its order (the scale products d·sc
// and dmin·mn once per tile, from the int8 scales widened by vpmovsxbd), so
// every variant gives the scalar bits.

// Bits FROM..FROM+W-1 of every byte moved to TO..TO+W-1, the rest zero (a
// 16-bit shift of at most 7 keeps the kept bits inside their byte).
template <int FROM, int TO, int W>
PAGODA_SIMD inline __m512i kbits(__m512i x) {
  const __m512i m = _mm512_set1_epi8(char(((1 << W) - 1) << TO));
  if constexpr (FROM < TO) return _mm512_and_si512(_mm512_slli_epi16(x, TO - FROM), m);
  if constexpr (FROM > TO) return _mm512_and_si512(_mm512_srli_epi16(x, FROM - TO), m);
  if constexpr (FROM == TO) return _mm512_and_si512(x, m);
}

// Weight vector J from the low chunks x and the high planes h.
template <WeightFormat F, int J>
PAGODA_SIMD inline __m512i kvec(const __m512i* x, const __m512i* h) {
  constexpr int kLo = packed_k_low_bits(F), kHi = packed_k_high_bits(F);
  __m512i v = kLo == 4 ? kbits<4 * (J / 4), 0, 4>(x[J % 4]) : kbits<2 * (J % 4), 0, 2>(x[J / 4]);
  if constexpr (kHi == 1) v = _mm512_or_si512(v, kbits<J, kLo, 1>(h[0]));
  if constexpr (kHi == 2) v = _mm512_or_si512(v, kbits<2 * (J % 4), kLo, 2>(h[J / 4]));
  return v;
}

template <WeightFormat F>
PAGODA_SIMD inline void kunpack(const uint8_t* q, __m512i* v) {
  constexpr int kLo = packed_k_low_bits(F), kHi = packed_k_high_bits(F);
  __m512i x[4], h[2];
#pragma GCC unroll 4
  for (int c = 0; c < kLo; ++c) x[c] = _mm512_loadu_si512(q + 64 * c);
#pragma GCC unroll 2
  for (int c = 0; c < kHi; ++c) h[c] = _mm512_loadu_si512(q + 64 * kLo + 64 * c);
  v[0] = kvec<F, 0>(x, h), v[1] = kvec<F, 1>(x, h), v[2] = kvec<F, 2>(x, h);
  v[3] = kvec<F, 3>(x, h), v[4] = kvec<F, 4>(x, h), v[5] = kvec<F, 5>(x, h);
  v[6] = kvec<F, 6>(x, h), v[7] = kvec<F, 7>(x, h);
}

// P_lo − offset·S_lo, P_hi − offset·S_hi (quant_packed.hpp), 16 rows (int32 lanes);
// without VNNI, Q4_K's lo holds P_lo + P_hi and hi 0 (its callers add the two).
template <WeightFormat F>
PAGODA_SIMD inline void kpartial(const __m512i* v, const ActBlock& a, __m512i& lo, __m512i& hi) {
  constexpr int kOff = packed_k_offset(F);  // Q3_K, Q6_K: P − offset·S from the start
  lo = _mm512_set1_epi32(-kOff * a.sum_lo);
  hi = _mm512_set1_epi32(-kOff * (a.sum - a.sum_lo));
#if PAGODA_VNNI
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    lo = _mm512_dpbusd_epi32(lo, v[c], bcast4(a.qs + 4 * c));
    hi = _mm512_dpbusd_epi32(hi, v[c + 4], bcast4(a.qs + 16 + 4 * c));
  }
#else
  constexpr int kG = F == WeightFormat::Q6_K ? 2 : 4;  // vectors per int16 sum
  // Q4_K: nibble·a pairs <= 2·15·128, so all 8 vectors sum in one int16
  // register (<= 30720, exact) and hi stays 0: one vpmaddwd, not two.
  constexpr bool kOne = F == WeightFormat::Q4_K;
  const __m512i ones = _mm512_set1_epi16(1);
#pragma GCC unroll 2
  for (int c0 = 0; c0 < 4; c0 += kG) {
    __m512i l16 = _mm512_setzero_si512(), h16 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = c0; c < c0 + kG; ++c) {
      l16 = _mm512_add_epi16(l16, _mm512_maddubs_epi16(v[c], bcast4(a.qs + 4 * c)));
      const __m512i h = _mm512_maddubs_epi16(v[c + 4], bcast4(a.qs + 16 + 4 * c));
      (kOne ? l16 : h16) = _mm512_add_epi16(kOne ? l16 : h16, h);
    }
    lo = _mm512_add_epi32(lo, _mm512_madd_epi16(l16, ones));
    if constexpr (!kOne) hi = _mm512_add_epi32(hi, _mm512_madd_epi16(h16, ones));
  }
#endif
}

PAGODA_SIMD inline __m512i load_s8x16(const uint8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// micro's contract for the K-quants.
template <WeightFormat F, int NG, int MR>
PAGODA_SIMD inline void kmicro(const uint8_t* g, int64_t gstride, const ActBlock* const* a,
                               int64_t nb, __m512* out, const uint8_t* pf) {
  constexpr int64_t kSc = packed_k_scale_at(F), kMn = packed_k_min_at(F);
  constexpr int64_t kH1 = packed_k_sub16(F) ? 16 : 0;
  constexpr bool kMin = packed_k_min(F);
  // Prefetched per block: the header's bytes before the tile (b % 8 == 0: the
  // super-block's; else the previous tile's tail, already on its way), the
  // tile, and one more line in case the span does not start a line.
  constexpr int64_t kHead = packed_k_super_header(F), kSpan = kHead + packed_tile_bytes(F) + 64;
  // Decode (one activation row) reads each group once, as a stream the
  // hardware prefetchers follow poorly across the headers: the kernel
  // prefetches kAhead bytes (about 7 blocks) ahead of itself.
  constexpr int64_t kAhead = 2048;
  __m512 acc[NG][MR], macc[NG][MR];
#pragma GCC unroll 4
  for (int i = 0; i < NG * MR; ++i) acc[i / MR][i % MR] = macc[i / MR][i % MR] = _mm512_setzero_ps();
  // Block b's super-block header and tile in a group, advanced block by block.
  int64_t head_at = 0, tile_at = packed_k_super_header(F);
  for (int64_t b = 0; b < nb; ++b, tile_at += packed_tile_bytes(F)) {
    if (b % 8 == 0 && b > 0) head_at = tile_at, tile_at += packed_k_super_header(F);
    if (pf != nullptr) {  // the next group's block b: its tile and the header before it
      const uint8_t* p = pf + tile_at - kHead;
#pragma GCC unroll 9
      for (int64_t off = 0; off < kSpan; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T1);
      }
    } else if constexpr (MR == 1) {  // decode: each group's bytes kAhead ahead
#pragma GCC unroll 2
      for (int i = 0; i < NG; ++i) {
        const uint8_t* p = g + i * gstride + tile_at - kHead + kAhead;
#pragma GCC unroll 9
        for (int64_t off = 0; off < kSpan; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
        }
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < NG; ++i) {
      const uint8_t* t = g + i * gstride + tile_at;
      const uint8_t* hd = g + i * gstride + head_at;  // the super-block's d[16], dmin[16]
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hd)));
      const __m512 dm =
          kMin ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hd + 32)))
               : _mm512_setzero_ps();
      // The exact fp32 scale products d·sc and dmin·mn, once per tile.
      const __m512 d0 = _mm512_mul_ps(dw, _mm512_cvtepi32_ps(load_s8x16(t + kSc)));
      const __m512 d1 = _mm512_mul_ps(dw, _mm512_cvtepi32_ps(load_s8x16(t + kSc + kH1)));
      const __m512 m0 = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(load_s8x16(t + kMn)));
      const __m512 m1 = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(load_s8x16(t + kMn + kH1)));
      __m512i v[8];
      kunpack<F>(t + packed_k_header(F), v);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const ActBlock& ab = a[r][b];
        __m512i plo, phi;
        kpartial<F>(v, ab, plo, phi);
        const __m512 ad = _mm512_set1_ps(ab.d);
        if constexpr (kH1 == 0) {  // Q4_K, Q5_K: one scale per 32 elements
          const __m512 p = _mm512_cvtepi32_ps(_mm512_add_epi32(plo, phi));
          acc[i][r] = _mm512_fmadd_ps(_mm512_mul_ps(d0, ad), p, acc[i][r]);
          macc[i][r] = _mm512_fmadd_ps(m0, _mm512_set1_ps(ab.s), macc[i][r]);
        } else {
          const int32_t s_lo = ab.sum_lo, s_hi = ab.sum - ab.sum_lo;
          acc[i][r] = _mm512_fmadd_ps(_mm512_mul_ps(d0, ad), _mm512_cvtepi32_ps(plo), acc[i][r]);
          acc[i][r] = _mm512_fmadd_ps(_mm512_mul_ps(d1, ad), _mm512_cvtepi32_ps(phi), acc[i][r]);
          if constexpr (kMin) {
            macc[i][r] = _mm512_fmadd_ps(m0, _mm512_set1_ps(ab.d * float(s_lo)), macc[i][r]);
            macc[i][r] = _mm512_fmadd_ps(m1, _mm512_set1_ps(ab.d * float(s_hi)), macc[i][r]);
          }
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NG * MR; ++i) {
    out[i] = kMin ? _mm512_sub_ps(acc[i / MR][i % MR], macc[i / MR][i % MR]) : acc[i / MR][i % MR];
  }
}

#if PAGODA_VNNI
// The 16 rows' fp32 steps of one tile for Q3_K and Q6_K (a scale per 16
// elements, an offset, no minimum): kmicro's P_lo / P_hi chains (from
// −offset·S) and its two FMAs per row in its order, so the scalar bits.
template <WeightFormat F>
PAGODA_SIMD inline void kwide_sub16(const __m512i* v, const ActBlock* const* a, int64_t b,
                                    __m512 d0, __m512 d1, __m512* acc) {
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    const ActBlock& ab = a[r][b];
    __m512i plo, phi;
    kpartial<F>(v, ab, plo, phi);
    const __m512 ad = _mm512_set1_ps(ab.d);
    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d0, ad), _mm512_cvtepi32_ps(plo), acc[r]);
    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d1, ad), _mm512_cvtepi32_ps(phi), acc[r]);
  }
}

// The 8 rows' sums of one tile for Q4_K and Q5_K (prefill blocks): the
// chains interleaved weight vector by weight vector (8 independent
// vpdpbusd in flight, where one row's 8-long chain would wait on its
// latency), then kmicro_wide's fp32 step per row.
PAGODA_SIMD inline void kwide_rows8(const __m512i* v, const ActBlock* const* a, int64_t b,
                                    __m512 d0, __m512* acc) {
  __m512i p[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) p[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {  // kpartial's pairs: v[c] with qs[4c..], v[c + 4] with qs[16 + 4c..]
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) p[r] = _mm512_dpbusd_epi32(p[r], v[c], bcast4(a[r][b].qs + 4 * c));
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) p[r] = _mm512_dpbusd_epi32(p[r], v[c + 4], bcast4(a[r][b].qs + 16 + 4 * c));
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d0, _mm512_set1_ps(a[r][b].d)), _mm512_cvtepi32_ps(p[r]), acc[r]);
  }
}

// kmicro for one group and kRows activation rows: 16 (decode batches of
// 16..32 rows: each tile is unpacked once for all 16 rows instead of once
// per 8), or 8 for Q4_K and Q5_K (prefill blocks: kwide_rows8).
//  - Q4_K, Q5_K (one scale per 32 elements): one vpdpbusd chain per row (16
//    chains hide the latency; int32 sums are exact, so the chain's order does
//    not matter). The accumulators and 8 weight vectors fill the registers,
//    so the minimum term (dmin·mn·s per block) is summed in a second pass
//    over the headers, block by block in the same order, and subtracted as
//    kmicro does;
//  - Q3_K, Q6_K (kwide_sub16, 16 rows only): no minimum, so one pass.
// The same fp32 operations in the same order: the scalar kernel's bits.
template <WeightFormat F, int kRows>
PAGODA_SIMD inline void kmicro_wide(const uint8_t* g, const ActBlock* const* a, int64_t nb,
                                    __m512* out, const uint8_t* pf) {
  constexpr bool kSub16 = packed_k_sub16(F);
  static_assert(kSub16 ? !packed_k_min(F) : packed_k_offset(F) == 0);
  static_assert(kRows == 16 || (kRows == 8 && !kSub16));
  constexpr int64_t kHead = packed_k_super_header(F), kTile = packed_tile_bytes(F);
  constexpr int64_t kSpan = kHead + kTile + 64;
  __m512 acc[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  int64_t head_at = 0, tile_at = kHead;
  for (int64_t b = 0; b < nb; ++b, tile_at += kTile) {
    if (b % 8 == 0 && b > 0) head_at = tile_at, tile_at += kHead;
    if (pf != nullptr) {
#pragma GCC unroll 9
      for (int64_t off = 0; off < kSpan; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(pf + tile_at - kHead + off), _MM_HINT_T1);
      }
    }
    const uint8_t* t = g + tile_at;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + head_at)));
    const __m512 d0 = _mm512_mul_ps(dw, _mm512_cvtepi32_ps(load_s8x16(t + packed_k_scale_at(F))));
    __m512i v[8];
    kunpack<F>(t + packed_k_header(F), v);
    if constexpr (kSub16) {
      const __m512 d1 = _mm512_mul_ps(dw, _mm512_cvtepi32_ps(load_s8x16(t + packed_k_scale_at(F) + 16)));
      kwide_sub16<F>(v, a, b, d0, d1, acc);
      continue;
    }
    if constexpr (kRows == 8) {
      kwide_rows8(v, a, b, d0, acc);
      continue;
    }
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const ActBlock& ab = a[r][b];
      __m512i p = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        p = _mm512_dpbusd_epi32(p, v[c], bcast4(ab.qs + 4 * c));
        p = _mm512_dpbusd_epi32(p, v[c + 4], bcast4(ab.qs + 16 + 4 * c));
      }
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d0, _mm512_set1_ps(ab.d)), _mm512_cvtepi32_ps(p), acc[r]);
    }
  }
  if constexpr (kSub16) {
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) out[r] = acc[r];
    return;
  }
  __m512 macc[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) macc[r] = _mm512_setzero_ps();
  head_at = 0, tile_at = kHead;
  for (int64_t b = 0; b < nb; ++b, tile_at += kTile) {
    if (b % 8 == 0 && b > 0) head_at = tile_at, tile_at += kHead;
    const __m512 dm =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + head_at + 32)));
    const __m512 m0 = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(load_s8x16(g + tile_at + packed_k_min_at(F))));
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) macc[r] = _mm512_fmadd_ps(m0, _mm512_set1_ps(a[r][b].s), macc[r]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) out[r] = _mm512_sub_ps(acc[r], macc[r]);
}
#endif
