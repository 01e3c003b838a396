// The 256-bit body of the packed K-quant kernels (Q2_K .. Q6_K; layout and
// math in gpu/cpu/quant_packed.hpp), for the AVX2 and AVX-VNNI variants.
// NOT a normal header: included once by quant_packed_ymm.hpp (after its
// bcast4 and PAGODA_VNNI) and gives kmicro, micro's counterpart. It is
// quant_packed_kq_zmm.hpp on half a group: unit u's 8 rows (h = u % 2) read
// bytes 32h.. of every 64-byte chunk and plane, int8 scales and minima at
// 8h, and its super-block header's d at 16h (dmin at 32 + 16h). The integer
// steps (AVX2: pmaddubsw summed in int16 over 4 vectors, 2 for Q6_K, then
// pmaddwd; AVX-VNNI: vpdpbusd) and the fp32 steps are the scalar kernel's.

template <int FROM, int TO, int W>
PAGODA_SIMD inline __m256i kbits(__m256i x) {
  const __m256i m = _mm256_set1_epi8(char(((1 << W) - 1) << TO));
  if constexpr (FROM < TO) return _mm256_and_si256(_mm256_slli_epi16(x, TO - FROM), m);
  if constexpr (FROM > TO) return _mm256_and_si256(_mm256_srli_epi16(x, FROM - TO), m);
  if constexpr (FROM == TO) return _mm256_and_si256(x, m);
}

template <WeightFormat F, int J>
PAGODA_SIMD inline __m256i kvec(const __m256i* x, const __m256i* h) {
  constexpr int kLo = packed_k_low_bits(F), kHi = packed_k_high_bits(F);
  __m256i v = kLo == 4 ? kbits<4 * (J / 4), 0, 4>(x[J % 4]) : kbits<2 * (J % 4), 0, 2>(x[J / 4]);
  if constexpr (kHi == 1) v = _mm256_or_si256(v, kbits<J, kLo, 1>(h[0]));
  if constexpr (kHi == 2) v = _mm256_or_si256(v, kbits<2 * (J % 4), kLo, 2>(h[J / 4]));
  return v;
}

// The unit's 8 weight vectors; q: its first quant byte (chunk 0 + 32h).
template <WeightFormat F>
PAGODA_SIMD inline void kunpack(const uint8_t* q, __m256i* v) {
  constexpr int kLo = packed_k_low_bits(F), kHi = packed_k_high_bits(F);
  __m256i x[4], h[2];
#pragma GCC unroll 4
  for (int c = 0; c < kLo; ++c) x[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * c));
#pragma GCC unroll 2
  for (int c = 0; c < kHi; ++c) {
    h[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * kLo + 64 * c));
  }
  v[0] = kvec<F, 0>(x, h), v[1] = kvec<F, 1>(x, h), v[2] = kvec<F, 2>(x, h);
  v[3] = kvec<F, 3>(x, h), v[4] = kvec<F, 4>(x, h), v[5] = kvec<F, 5>(x, h);
  v[6] = kvec<F, 6>(x, h), v[7] = kvec<F, 7>(x, h);
}

// kq_zmm's kpartial for 8 rows: P_lo − offset·S_lo, P_hi − offset·S_hi; without
// VNNI, Q4_K's lo holds P_lo + P_hi and hi 0 (its callers add the two).
template <WeightFormat F>
PAGODA_SIMD inline void kpartial(const __m256i* v, const ActBlock& a, __m256i& lo, __m256i& hi) {
  constexpr int kOff = packed_k_offset(F);  // Q3_K, Q6_K: P − offset·S from the start
  lo = _mm256_set1_epi32(-kOff * a.sum_lo);
  hi = _mm256_set1_epi32(-kOff * (a.sum - a.sum_lo));
#if PAGODA_VNNI
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    lo = _mm256_dpbusd_avx_epi32(lo, v[c], bcast4(a.qs + 4 * c));
    hi = _mm256_dpbusd_avx_epi32(hi, v[c + 4], bcast4(a.qs + 16 + 4 * c));
  }
#else
  constexpr int kG = F == WeightFormat::Q6_K ? 2 : 4;  // vectors per int16 sum
  // Q4_K: nibble·a pairs <= 2·15·128, so all 8 vectors sum in one int16
  // register (<= 30720, exact) and hi stays 0: one vpmaddwd, not two.
  constexpr bool kOne = F == WeightFormat::Q4_K;
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 2
  for (int c0 = 0; c0 < 4; c0 += kG) {
    __m256i l16 = _mm256_setzero_si256(), h16 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = c0; c < c0 + kG; ++c) {
      l16 = _mm256_add_epi16(l16, _mm256_maddubs_epi16(v[c], bcast4(a.qs + 4 * c)));
      const __m256i h = _mm256_maddubs_epi16(v[c + 4], bcast4(a.qs + 16 + 4 * c));
      (kOne ? l16 : h16) = _mm256_add_epi16(kOne ? l16 : h16, h);
    }
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(l16, ones));
    if constexpr (!kOne) hi = _mm256_add_epi32(hi, _mm256_madd_epi16(h16, ones));
  }
#endif
}

PAGODA_SIMD inline __m256i load_s8x8(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

PAGODA_SIMD inline __m256 load_h8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// micro's contract (quant_packed_ymm.hpp) for the K-quants.
template <WeightFormat F, int NU, int MR>
PAGODA_SIMD inline void kmicro(const LinearWeight& w, int64_t u0, const ActBlock* const* a,
                               __m256* out, const uint8_t* pf) {
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
  const int64_t nb = w.k / kQuantBlock, gstride = packed_group_bytes(F, w.k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  __m256 acc[NU][MR], macc[NU][MR];
  for (int i = 0; i < NU * MR; ++i) acc[i / MR][i % MR] = macc[i / MR][i % MR] = _mm256_setzero_ps();
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
    } else if constexpr (MR == 1) {  // decode: each group's bytes kAhead ahead, once per group
#pragma GCC unroll 2
      for (int i = 0; i < NU; ++i) {
        if (i > 0 && (u0 + i) % 2 == 1) continue;  // the group of unit u0 + i − 1
        const uint8_t* p = base + (u0 + i) / 2 * gstride + tile_at - kHead + kAhead;
#pragma GCC unroll 9
        for (int64_t off = 0; off < kSpan; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
        }
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < NU; ++i) {
      const int64_t u = u0 + i, h = u % 2;
      const uint8_t* t = base + (u / 2) * gstride + tile_at;
      const uint8_t* hd = base + (u / 2) * gstride + head_at;  // the super-block's d[16], dmin[16]
      const __m256 dw = load_h8(hd + 16 * h);
      const __m256 dm = kMin ? load_h8(hd + 32 + 16 * h) : _mm256_setzero_ps();
      // The exact fp32 scale products d·sc and dmin·mn, once per tile.
      const __m256 d0 = _mm256_mul_ps(dw, _mm256_cvtepi32_ps(load_s8x8(t + kSc + 8 * h)));
      const __m256 d1 = _mm256_mul_ps(dw, _mm256_cvtepi32_ps(load_s8x8(t + kSc + kH1 + 8 * h)));
      const __m256 m0 = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(load_s8x8(t + kMn + 8 * h)));
      const __m256 m1 = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(load_s8x8(t + kMn + kH1 + 8 * h)));
      __m256i v[8];
      kunpack<F>(t + packed_k_header(F) + 32 * h, v);
#pragma GCC unroll 2
      for (int r = 0; r < MR; ++r) {
        const ActBlock& ab = a[r][b];
        __m256i plo, phi;
        kpartial<F>(v, ab, plo, phi);
        const __m256 ad = _mm256_set1_ps(ab.d);
        if constexpr (kH1 == 0) {  // Q4_K, Q5_K: one scale per 32 elements
          const __m256 p = _mm256_cvtepi32_ps(_mm256_add_epi32(plo, phi));
          acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(d0, ad), p, acc[i][r]);
          macc[i][r] = _mm256_fmadd_ps(m0, _mm256_set1_ps(ab.s), macc[i][r]);
        } else {
          const int32_t s_lo = ab.sum_lo, s_hi = ab.sum - ab.sum_lo;
          acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(d0, ad), _mm256_cvtepi32_ps(plo), acc[i][r]);
          acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(d1, ad), _mm256_cvtepi32_ps(phi), acc[i][r]);
          if constexpr (kMin) {
            macc[i][r] = _mm256_fmadd_ps(m0, _mm256_set1_ps(ab.d * float(s_lo)), macc[i][r]);
            macc[i][r] = _mm256_fmadd_ps(m1, _mm256_set1_ps(ab.d * float(s_hi)), macc[i][r]);
          }
        }
      }
    }
  }
  for (int i = 0; i < NU * MR; ++i) {
    out[i] = kMin ? _mm256_sub_ps(acc[i / MR][i % MR], macc[i / MR][i % MR]) : acc[i / MR][i % MR];
  }
}
