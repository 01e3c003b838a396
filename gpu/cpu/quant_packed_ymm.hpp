// The 256-bit body of the packed-layout kernels (gpu/cpu/quant_packed.hpp),
// shared by the AVX2 and AVX-VNNI variants. NOT a normal header: each
// variant's .cpp includes it once, inside its own anonymous namespace, after
// defining
//   PAGODA_SIMD   the function attribute, e.g. target("avx2,fma,f16c")
//   PAGODA_VNNI   0: pmaddubsw + pmaddwd; 1: vpdpbusd (AVX-VNNI)
// and gets `template <WeightFormat F> void tile(...)` with
// packed_tile_scalar's contract.
//
// A ymm covers half a group: 8 rows ("unit" u = 2g + h, h = 0, 1, rows
// 16g + 8h ..). The unit's bytes of chunk c are tile + header + 64c + 32h,
// its scales tile + 16h (Q4_1 / Q5_1 offsets tile + 32 + 16h; the Q5 plane's
// bytes, like a chunk's, + 32h). The exact P_b:
//  - VNNI: as the AVX-512 kernel (offsets removed in int32);
//  - AVX2, Q4: pmaddubsw(nibbles, activations) for the 8 chunk halves summed
//    in int16 (|sum| <= 8·2·15·127 = 30480, no overflow), one pmaddwd;
//  - Q5_0 / Q5_1: v = nibble | plane bit (hibit<J>); AVX2 sums 4 chunks per
//    int16 accumulator (<= 31496) and takes two pmaddwd;
//  - IQ4_NL / IQ4_XS (fp32 scales, tile + 32h): pshufb of the nibbles in
//    kIq4GridU8 gives Q8_0's stored form;
//  - AVX2, Q8_0 / IQ4_*: the signed weight w = byte ^ 0x80,
//    pmaddubsw(|w|, sign(a, w)) (pairs <= 2·128·127 < 2^15) and pmaddwd
//    per chunk, summed in int32.
// The fp32 steps are those of the scalar kernel, so the bits are the same.

template <WeightFormat F>
constexpr int64_t kHeader = packed_header_bytes(F);

PAGODA_SIMD inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The 5th bits of weight vector J (elements 4J + t) as 0x10 in each byte
// (see quant_packed_zmm.hpp's hibit).
template <int J>
PAGODA_SIMD inline __m256i hibit(__m256i plane) {
  const __m256i m = _mm256_set1_epi8(0x10);
  if constexpr (J < 4) return _mm256_and_si256(_mm256_slli_epi16(plane, 4 - J), m);
  if constexpr (J == 4) return _mm256_and_si256(plane, m);
  if constexpr (J > 4) return _mm256_and_si256(_mm256_srli_epi16(plane, J - 4), m);
}

template <int C>
PAGODA_SIMD inline void unpack5(const uint8_t* q, __m256i plane, __m256i* v) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * C));
  v[C] = _mm256_or_si256(_mm256_and_si256(x, mask), hibit<C>(plane));
  v[C + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), mask), hibit<C + 4>(plane));
}

// The unit's 8 weight vectors: Q4 / Q5: low nibbles (| 5th bits) of chunks
// 0..3, then high nibbles; Q8_0: the stored bytes of chunks 0..7; IQ4_NL:
// the nibbles looked up in kIq4GridU8 (Q8_0's stored form).
template <WeightFormat F>
PAGODA_SIMD inline void unpack(const uint8_t* q, __m256i* v) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  if constexpr (F == WeightFormat::Q8_0) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) v[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * c));
  } else if constexpr (F == WeightFormat::IQ4_NL || F == WeightFormat::IQ4_XS) {
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4GridU8)));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * c));
      v[c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(x, mask));
      v[c + 4] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(x, 4), mask));
    }
  } else if constexpr (packed_five_bit(F)) {
    const __m256i plane = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 4 * 64));
    unpack5<0>(q, plane, v);
    unpack5<1>(q, plane, v);
    unpack5<2>(q, plane, v);
    unpack5<3>(q, plane, v);
  } else {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * c));
      v[c] = _mm256_and_si256(x, mask);
      v[c + 4] = _mm256_and_si256(_mm256_srli_epi16(x, 4), mask);
    }
  }
}

template <WeightFormat F>
PAGODA_SIMD inline __m256i partial(const __m256i* v, const ActBlock& a) {
#if PAGODA_VNNI
  __m256i p0 = _mm256_setzero_si256();
  if constexpr (F == WeightFormat::Q4_0) p0 = _mm256_set1_epi32(-8 * a.sum);
  if constexpr (F == WeightFormat::Q5_0) p0 = _mm256_set1_epi32(-16 * a.sum);
  if constexpr (packed_byte_form(F)) p0 = _mm256_set1_epi32(-128 * a.sum);
  __m256i p1 = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    p0 = _mm256_dpbusd_avx_epi32(p0, v[c], bcast4(a.qs + 4 * c));
    p1 = _mm256_dpbusd_avx_epi32(p1, v[c + 4], bcast4(a.qs + 16 + 4 * c));
  }
  return _mm256_add_epi32(p0, p1);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (packed_byte_form(F)) {
    __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i w = _mm256_xor_si256(v[c], _mm256_set1_epi8(-128));
      const __m256i s = _mm256_sign_epi8(bcast4(a.qs + 4 * c), w);
      p = _mm256_add_epi32(p, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), s), ones));
    }
    return p;
  } else if constexpr (packed_five_bit(F)) {
    // v·a pairs <= 2·31·127; four chunks' sums <= 31496 fit int16.
    __m256i lo16 = _mm256_setzero_si256(), hi16 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      lo16 = _mm256_add_epi16(lo16, _mm256_maddubs_epi16(v[c], bcast4(a.qs + 4 * c)));
      hi16 = _mm256_add_epi16(hi16, _mm256_maddubs_epi16(v[c + 4], bcast4(a.qs + 16 + 4 * c)));
    }
    const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(lo16, ones), _mm256_madd_epi16(hi16, ones));
    if constexpr (F == WeightFormat::Q5_0) return _mm256_sub_epi32(p, _mm256_set1_epi32(16 * a.sum));
    return p;
  } else {
    __m256i s16 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[c], bcast4(a.qs + 4 * c)));
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[c + 4], bcast4(a.qs + 16 + 4 * c)));
    }
    const __m256i p = _mm256_madd_epi16(s16, ones);
    if constexpr (F == WeightFormat::Q4_0) return _mm256_sub_epi32(p, _mm256_set1_epi32(8 * a.sum));
    return p;
  }
#endif
}

// out[i·MR + r] = the 8 outputs of unit u0 + i for activation row a[r].
// pf (nullptr: none): a group's tiles to prefetch into L2 block for block.
template <WeightFormat F, int NU, int MR>
PAGODA_SIMD inline void micro(const LinearWeight& w, int64_t u0, const ActBlock* const* a,
                              __m256* out, const uint8_t* pf) {
  constexpr int64_t T = packed_tile_bytes(F);
  constexpr bool kOffset = packed_has_offset(F);
  const int64_t nb = w.k / kQuantBlock;
  const auto* base = static_cast<const uint8_t*>(w.data);
  __m256 acc[NU][MR], macc[NU][MR];
  for (int i = 0; i < NU * MR; ++i) acc[i / MR][i % MR] = macc[i / MR][i % MR] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (pf != nullptr) {
#pragma GCC unroll 9
      for (int64_t off = 0; off < T; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(pf + b * T + off), _MM_HINT_T1);
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < NU; ++i) {
      const int64_t u = u0 + i, h = u % 2;
      const uint8_t* t = base + ((u / 2) * nb + b) * T;
      const __m256 dw =
          packed_f32_scales(F)
              ? _mm256_loadu_ps(reinterpret_cast<const float*>(t + 32 * h))
              : _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t + 16 * h)));
      __m256 mw = _mm256_setzero_ps();
      if constexpr (kOffset) {
        mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t + 32 + 16 * h)));
      }
      __m256i v[8];
      unpack<F>(t + kHeader<F> + 32 * h, v);
#pragma GCC unroll 2
      for (int r = 0; r < MR; ++r) {
        const ActBlock& ab = a[r][b];
        const __m256 p = _mm256_cvtepi32_ps(partial<F>(v, ab));
        acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ab.d)), p, acc[i][r]);
        if constexpr (kOffset) macc[i][r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(ab.s), macc[i][r]);
      }
    }
  }
  for (int i = 0; i < NU * MR; ++i) {
    out[i] = kOffset ? _mm256_add_ps(acc[i / MR][i % MR], macc[i / MR][i % MR])
                     : acc[i / MR][i % MR];
  }
}

#include "gpu/cpu/quant_packed_kq_ymm.hpp"

// Stores unit u's 8 outputs for row m (only the rows < w.n).
PAGODA_SIMD inline void store(const LinearWeight& w, float* y, int64_t m, int64_t u, __m256 v) {
  float* dst = y + m * w.n + u * 8;
  const int64_t valid = std::min<int64_t>(8, w.n - u * 8);
  if (valid == 8) {
    _mm256_storeu_ps(dst, v);
  } else if (valid > 0) {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    std::memcpy(dst, tmp, size_t(valid) * sizeof(float));
  }
}

// Units u .. u+NU-1 for rows m .. m+MR-1; with `prefetch`, the tiles of the
// group after unit u's (when it exists) are prefetched along the way.
template <WeightFormat F, int NU, int MR>
PAGODA_SIMD inline void run(const LinearWeight& w, const ActBlock* const* a, int64_t m, int64_t u,
                            float* y, bool prefetch = false) {
  const int64_t next = u / 2 + 1, gstride = packed_group_bytes(F, w.k);
  const uint8_t* pf = prefetch && next * kPackRows < w.n
                          ? static_cast<const uint8_t*>(w.data) + next * gstride
                          : nullptr;
  __m256 out[NU * MR];
  if constexpr (packed_kquant(F)) {
    kmicro<F, NU, MR>(w, u, a, out, pf);
  } else {
    micro<F, NU, MR>(w, u, a, out, pf);
  }
  for (int i = 0; i < NU; ++i) {
    for (int r = 0; r < MR; ++r) store(w, y, m + r, u + i, out[i * MR + r]);
  }
}

template <WeightFormat F>
PAGODA_SIMD void tile(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                      int64_t m1, int64_t g0, int64_t g1) {
  const int64_t nb = w.k / kQuantBlock;
  const int64_t u1 = std::min(2 * g1, (w.n + 7) / 8);  // units past the last row are skipped
  if (m1 - m0 == 1) {
    const ActBlock* a[1] = {act + m0 * nb};
    int64_t u = 2 * g0;
    for (; u + 2 <= u1; u += 2) run<F, 2, 1>(w, a, m0, u, y);
    if (u < u1) run<F, 1, 1>(w, a, m0, u, y);
    return;
  }
  // Batches: the first pass over a group's first unit prefetches the next group.
  for (int64_t u = 2 * g0; u < u1; ++u) {
    for (int64_t m = m0; m < m1; m += 2) {
      const ActBlock* a[2] = {act + m * nb, act + std::min(m + 1, m1 - 1) * nb};
      const bool pf = m == m0 && u % 2 == 0;
      if (m + 1 < m1) {
        run<F, 1, 2>(w, a, m, u, y, pf);
      } else {
        run<F, 1, 1>(w, a, m, u, y, pf);
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
