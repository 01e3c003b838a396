// The SIMD body of quant_matmul's tile kernels, shared by the ISA variants
// (quant_matmul_avx2.cpp, quant_matmul_avxvnni.cpp,
// quant_matmul_avx512vnni.cpp). NOT a normal header: each variant's .cpp
// includes it once, inside its own anonymous namespace, after defining
//   PAGODA_SIMD        the function attribute, e.g. target("avx2,fma,f16c")
//   PAGODA_VNNI        0: maddubs+madd (AVX2); 1: vpdpbusd
//   PAGODA_DPBUSD(acc, u, s)  (VNNI only) acc + Σ of 4 adjacent u8·s8 per lane
//   PAGODA_NR_DECODE, PAGODA_NR_BATCH  weight rows per micro-kernel for one
//                      activation row / for 2-4 rows (register tile sizes)
// and gets `template <WeightFormat F> void tile(...)` with quant_tile_scalar's
// contract.
//
// The math (identical in every variant and in quant_tile_scalar, bit for bit):
// for weight row w and activation row a, per 32-element block b,
//   P_l = Σ_{j=4l..4l+3} q_w[j]·q_a[j]   (l = 0..7, exact int32),
//   acc_l = fma(fp32(d_w·d_a), fp32(P_l), acc_l)       (blocks in order),
//   macc = fma(m_w, s_a, macc) (Q4_1; else macc = 0)     (blocks in order),
//   y = ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)) + macc.
// The variants differ only in how they get the exact integers P_l:
//  - AVX2: sign trick |w|·(x·sign w) for signed weights, then maddubs (pairs
//    into int16: |pair| <= 2·128·127 < 2^15, no saturation) and madd with 1;
//  - VNNI: vpdpbusd (u8·s8, 4 products summed into int32, no saturation).
//    Signed weights use offsets instead of the sign trick, removed exactly in
//    int32: Q4_0 as Σ(q_w)·x − 8·Σx (nibbles are unsigned), Q8_0 as
//    Σ w·(x+128) − 128·Σw.
// and in tile shapes (how many rows share one pass over K), which do not
// change any row's operations.

// Weight quants of one block as 32 int8 lanes in element order, plus scales.
struct WeightBlock {
  __m256i q;  // Q8_0: signed; Q4_0, Q4_1: unsigned nibbles 0..15
  float d;
  float m;  // Q4_1 only
};

PAGODA_SIMD inline float half(uint16_t h) { return _cvtsh_ss(h); }

PAGODA_SIMD inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(packed, mask);                     // elements 0..15
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);  // elements 16..31
  return _mm256_set_m128i(hi, lo);
}

template <WeightFormat F>
PAGODA_SIMD inline WeightBlock load_block(const uint8_t* p) {
  if constexpr (F == WeightFormat::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)), half(b->d), 0.0f};
  } else if constexpr (F == WeightFormat::Q4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(p);
    return {unpack_nibbles(b->qs), half(b->d), 0.0f};
  } else {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
    return {unpack_nibbles(b->qs), half(b->d), half(b->m)};
  }
}

PAGODA_SIMD inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Per-weight-row operand of the integer stage (prepared once per block and
// shared by the activation rows of the micro-kernel).
struct WeightOperand {
  __m256i u;    // AVX2: |w| (Q4_1: w); VNNI: the weight quants as they are
  __m256i aux;  // AVX2: signed w (its sign goes to x); VNNI Q8_0: −128·Σw lanes
};

template <WeightFormat F>
PAGODA_SIMD inline WeightOperand weight_operand(__m256i q) {
#if PAGODA_VNNI
  if constexpr (F == WeightFormat::Q8_0) {
    const __m256i c = PAGODA_DPBUSD(_mm256_setzero_si256(), _mm256_set1_epi8(-128), q);
    return {q, _mm256_sub_epi32(_mm256_setzero_si256(), c)};
  } else {
    return {q, _mm256_setzero_si256()};
  }
#else
  if constexpr (F == WeightFormat::Q8_0) {
    return {_mm256_sign_epi8(q, q), q};
  } else if constexpr (F == WeightFormat::Q4_0) {
    const __m256i s = _mm256_sub_epi8(q, _mm256_set1_epi8(8));
    return {_mm256_sign_epi8(s, s), s};
  } else {
    return {q, q};
  }
#endif
}

// Per-activation-row operand of the integer stage (once per block, shared by
// the weight rows of the micro-kernel).
struct ActOperand {
  __m256i s;    // the activation quants (VNNI Q8_0: x+128, read as unsigned)
  __m256i aux;  // VNNI Q4_0: −8·Σx lanes; else unused
};

template <WeightFormat F>
PAGODA_SIMD inline ActOperand act_operand(const ActBlock& ab) {
  const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
#if PAGODA_VNNI
  if constexpr (F == WeightFormat::Q8_0) {
    return {_mm256_xor_si256(s, _mm256_set1_epi8(-128)), _mm256_setzero_si256()};
  } else if constexpr (F == WeightFormat::Q4_0) {
    const __m256i c = PAGODA_DPBUSD(_mm256_setzero_si256(), _mm256_set1_epi8(8), s);
    return {s, _mm256_sub_epi32(_mm256_setzero_si256(), c)};
  } else {
    return {s, _mm256_setzero_si256()};
  }
#else
  return {s, _mm256_setzero_si256()};
#endif
}

// The 8 exact int32 partials P_l of one (weight row, activation row) block.
template <WeightFormat F>
PAGODA_SIMD inline __m256i partials(const WeightOperand& w, const ActOperand& a) {
#if PAGODA_VNNI
  if constexpr (F == WeightFormat::Q8_0) {
    return PAGODA_DPBUSD(w.aux, a.s, w.u);  // Σ (x+128)·w − 128·Σw
  } else {
    return PAGODA_DPBUSD(a.aux, w.u, a.s);  // Q4_0: Σ q·x − 8·Σx; Q4_1: Σ q·x
  }
#else
  const __m256i s = F == WeightFormat::Q4_1 ? a.s : _mm256_sign_epi8(a.s, w.aux);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.u, s), _mm256_set1_epi16(1));
#endif
}

// Micro-kernel: out[i][r] = dot(weight row w[i], activation row a[r]) for NR
// weight rows × MR activation rows over nb blocks. The block scale d_w·d_a
// is one vector multiply of two broadcasts (the same fp32 product as the
// scalar kernel's), and Q4_1's offset term runs for the MR rows at once in
// the lanes of one xmm register per weight row (lane r: fma(m_w, s_a[r], ·)),
// which keeps every accumulator in a register.
template <WeightFormat F, int NR, int MR>
PAGODA_SIMD inline void micro(const uint8_t* const* w, const ActBlock* const* a, int64_t nb,
                              float (*out)[4]) {
  static_assert(MR >= 1 && MR <= 4);
  constexpr int64_t kBytes = block_bytes(F);
  constexpr bool kOffset = F == WeightFormat::Q4_1;
  __m256 acc[NR][MR];
  __m128 macc[NR];
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i) {
    macc[i] = _mm_setzero_ps();
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) acc[i][r] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    WeightOperand wo[NR];
    __m256 dw[NR];
#pragma GCC unroll 8
    for (int i = 0; i < NR; ++i) {
      const WeightBlock wb = load_block<F>(w[i] + b * kBytes);
      wo[i] = weight_operand<F>(wb.q);
      dw[i] = _mm256_set1_ps(wb.d);
      if constexpr (kOffset) {
        // lanes r < MR: the activation rows' s; the rest repeat row MR-1 (unused).
        const __m128 s4 = _mm_setr_ps(a[0][b].s, a[MR > 1 ? 1 : 0][b].s, a[MR > 2 ? 2 : 0][b].s,
                                      a[MR > 3 ? 3 : 0][b].s);
        macc[i] = _mm_fmadd_ps(_mm_set1_ps(wb.m), s4, macc[i]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const ActBlock& ab = a[r][b];
      const ActOperand ao = act_operand<F>(ab);
      const __m256 dx = _mm256_broadcast_ss(&ab.d);
#pragma GCC unroll 8
      for (int i = 0; i < NR; ++i) {
        const __m256 p = _mm256_cvtepi32_ps(partials<F>(wo[i], ao));
        acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(dw[i], dx), p, acc[i][r]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i) {
    alignas(16) float m[4];
    _mm_store_ps(m, macc[i]);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) out[i][r] = hsum(acc[i][r]) + m[r];
  }
}

// Computes and stores y[m + r, n + i] for r < rows (1..4), i < NR.
template <WeightFormat F, int NR>
PAGODA_SIMD inline void run_micro(const LinearWeight& w, const ActBlock* const* a, int rows,
                                  int64_t m, int64_t n, float* y) {
  const int64_t nb = w.k / kQuantBlock, row_bytes = w.row_bytes();
  const uint8_t* wrows[NR];
  for (int i = 0; i < NR; ++i) wrows[i] = static_cast<const uint8_t*>(w.data) + (n + i) * row_bytes;
  float out[NR][4] = {};  // micro<> writes out[i][0..rows)
  switch (rows) {
    case 4: micro<F, NR, 4>(wrows, a, nb, out); break;
    case 3: micro<F, NR, 3>(wrows, a, nb, out); break;
    case 2: micro<F, NR, 2>(wrows, a, nb, out); break;
    default: micro<F, NR, 1>(wrows, a, nb, out); break;
  }
  for (int i = 0; i < NR; ++i) {
    for (int r = 0; r < rows; ++r) y[(m + r) * w.n + n + i] = out[i][r];
  }
}

// Steps over 4 activation rows at a time; NR weight rows per micro-kernel
// call, sized to the register file (a single activation row gets its own NR).
template <WeightFormat F, int NR>
PAGODA_SIMD inline void tile_rows(const LinearWeight& w, const ActBlock* const* a, int rows,
                                  int64_t m, int64_t n0, int64_t n1, float* y) {
  int64_t n = n0;
  for (; n + NR <= n1; n += NR) run_micro<F, NR>(w, a, rows, m, n, y);
  for (; n < n1; ++n) run_micro<F, 1>(w, a, rows, m, n, y);
}

template <WeightFormat F>
PAGODA_SIMD void tile(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                      int64_t m1, int64_t n0, int64_t n1) {
  constexpr int kMR = 4;
  const int64_t nb = w.k / kQuantBlock;
  for (int64_t m = m0; m < m1; m += kMR) {
    const int rows = static_cast<int>(std::min<int64_t>(kMR, m1 - m));
    const ActBlock* a[kMR];
    for (int r = 0; r < kMR; ++r) a[r] = act + (m + std::min(r, rows - 1)) * nb;
    if (rows == 1) {
      tile_rows<F, PAGODA_NR_DECODE>(w, a, rows, m, n0, n1, y);
    } else {
      tile_rows<F, PAGODA_NR_BATCH>(w, a, rows, m, n0, n1, y);
    }
  }
}

// The variant's entry point body (quant_tile_scalar's contract).
PAGODA_SIMD inline void tile_any(const LinearWeight& w, const ActBlock* act, float* y,
                                 int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  switch (w.format) {
    case WeightFormat::Q8_0: tile<WeightFormat::Q8_0>(w, act, y, m0, m1, n0, n1); return;
    case WeightFormat::Q4_0: tile<WeightFormat::Q4_0>(w, act, y, m0, m1, n0, n1); return;
    case WeightFormat::Q4_1: tile<WeightFormat::Q4_1>(w, act, y, m0, m1, n0, n1); return;
    default: return;
  }
}
