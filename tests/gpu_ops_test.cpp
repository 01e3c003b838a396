// The CPU backend's elementwise ops, buffers and KV cache plumbing, each
// against a naive reference written here (fp64 where it matters):
// embedding, RMSNorm (+ fused residual), SiLU*mul, KV cache write,
// copy_blocks, the fused pairs. RoPE: rope_op_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/quant_packed.hpp"
#include "tests/backend_test_util.hpp"

namespace pagoda::gpu {
namespace {

using test::random_vec;

std::unique_ptr<Backend> cpu_backend(size_t threads = 3, uint64_t limit = 0) {
  auto b = make_backend(BackendKind::kCpu, BackendOptions{limit, threads});
  EXPECT_TRUE(b.ok());
  return std::move(b).value();
}

TEST(Backend, AllocateUploadDownloadAndLimit) {
  auto be = cpu_backend(2, 1 << 20);
  EXPECT_EQ(be->kind(), BackendKind::kCpu);
  EXPECT_TRUE(be->host_accessible());
  auto buf = be->allocate(1000);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % 256, 0u);
  std::vector<uint8_t> in(100), out(100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7);
  ASSERT_TRUE(be->upload(*buf, 900, in.data(), 100).ok());
  ASSERT_TRUE(be->download(*buf, 900, out.data(), 100).ok());
  EXPECT_EQ(in, out);
  EXPECT_FALSE(be->upload(*buf, 901, in.data(), 100).ok());  // past the end
  EXPECT_FALSE(be->download(*buf, 2000, out.data(), 1).ok());
  // The cap: a second megabyte does not fit; freeing makes room again.
  EXPECT_FALSE(be->allocate(1 << 20).ok());
  buf->reset();
  EXPECT_TRUE(be->allocate(1 << 20).ok());
  auto empty = be->allocate(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(Backend, CudaRequestWithoutCudaIsAnError) {
#ifndef PAGODA_HAVE_CUDA
  auto b = make_backend(BackendKind::kCuda);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("CUDA"), std::string::npos);
  auto a = make_backend(BackendKind::kAuto);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->kind(), BackendKind::kCpu);
#else
  GTEST_SKIP() << "CUDA build: the fallback is covered by the CPU-only build";
#endif
}

TEST(KvCache, SizedFromBudget) {
  auto be = cpu_backend();
  KvCacheSpec spec{3, 2, 64, 16, KvDtype::kF32};
  EXPECT_EQ(spec.bytes_per_block_all_layers(), 2 * 3 * 2 * 16 * 64 * 4);
  const uint64_t per_block = uint64_t(spec.bytes_per_block_all_layers());
  auto kv = be->create_kv_cache_for_budget(spec, 10 * per_block + per_block / 2);
  ASSERT_TRUE(kv.ok()) << kv.error().message;
  EXPECT_EQ(kv->num_blocks(), 10);
  EXPECT_EQ(kv->layout().block_stride(), 2 * 16 * 64);
  for (int l = 0; l < 3; ++l) {
    EXPECT_NE(kv->layer(l).k, nullptr);
    EXPECT_NE(kv->layer(l).k, kv->layer(l).v);
  }
  EXPECT_FALSE(be->create_kv_cache_for_budget(spec, per_block - 1).ok());
  EXPECT_FALSE(be->create_kv_cache(KvCacheSpec{3, 2, 64, 12, KvDtype::kF32}, 4).ok());
  // A budget the memory cap cannot back is an error value, not a crash.
  auto small = cpu_backend(1, 4 * per_block);
  EXPECT_FALSE(small->create_kv_cache(spec, 8).ok());
}

TEST(KvCacheLayout, OffsetsAreInt64) {
  KvCacheLayout L{8, 128, 16, 3'000'000};
  EXPECT_EQ(L.block_stride(), 8 * 16 * 128);
  EXPECT_EQ(L.offset(2'999'999, 7, 15), int64_t{2'999'999} * 16384 + 7 * 2048 + 15 * 128);
  EXPECT_GT(L.offset(2'999'999, 0, 0), int64_t{1} << 32);
  EXPECT_EQ(L.slot_offset(int64_t{2'999'999} * 16 + 15, 7), L.offset(2'999'999, 7, 15));
}

TEST(Ops, EmbeddingGathersRowsAndZeroesBadIds) {
  auto be = cpu_backend();
  const int vocab = 50, hidden = 37, T = 6;
  auto table = random_vec(size_t(vocab * hidden), 1);
  std::vector<int32_t> ids = {3, 49, 0, -1, 50, 3};
  std::vector<float> out(size_t(T * hidden), 123.0f);
  EmbeddingParams p{table.data(), ids.data(), out.data(), T, hidden, vocab};
  be->embedding(p);
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < hidden; ++d) {
      float want = (ids[t] >= 0 && ids[t] < vocab) ? table[size_t(ids[t] * hidden + d)] : 0.0f;
      ASSERT_EQ(out[size_t(t * hidden + d)], want) << t << "," << d;
    }
  }
}

// A quantized table (CPU only) is dequantized row by row as it is gathered:
// the same floats as dequantizing the whole table first, for a 32-element
// format and two K-quants (random bytes with a sane fp16 scale in each block).
TEST(Ops, EmbeddingGathersQuantizedRowsAsTheirDequantizedFloats) {
  auto be = cpu_backend();
  const int vocab = 40, hidden = 512, T = 7;
  std::vector<int32_t> ids = {3, 39, 0, -1, 40, 3, 17};
  for (WeightFormat f : {WeightFormat::Q4_0, WeightFormat::Q4_K, WeightFormat::Q6_K}) {
    const int64_t row_bytes = storage_bytes(f, hidden);
    std::vector<uint8_t> q(size_t(vocab * row_bytes));
    std::mt19937 bytes_rng{static_cast<uint32_t>(f)};
    for (uint8_t& b : q) b = uint8_t(bytes_rng());
    const int64_t bb = block_bytes(f), nblocks = int64_t(q.size()) / bb;
    const uint16_t d = fp32_to_fp16(0.01f);
    const size_t d_at = f == WeightFormat::Q6_K ? 208 : 0;  // Q6_K keeps d last
    for (int64_t b = 0; b < nblocks; ++b) {
      std::memcpy(q.data() + b * bb + d_at, &d, 2);
      if (f == WeightFormat::Q4_K) std::memcpy(q.data() + b * bb + 2, &d, 2);  // dmin
    }
    const std::vector<float> table = dequantize(f, q.data(), int64_t(vocab) * hidden);
    std::vector<float> out(size_t(T * hidden), 123.0f);
    EmbeddingParams p{nullptr, ids.data(), out.data(), T, hidden, vocab, q.data(), f};
    be->embedding(p);
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < hidden; ++i) {
        const bool ok = ids[t] >= 0 && ids[t] < vocab;
        const float want = ok ? table[size_t(ids[t] * hidden + i)] : 0.0f;
        ASSERT_EQ(out[size_t(t * hidden + i)], want) << format_name(f) << " " << t << "," << i;
      }
    }
  }
}

double ref_rms_inv(const float* x, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  return 1.0 / std::sqrt(ss / n + eps);
}

TEST(Ops, RmsNormPlainAndInPlace) {
  auto be = cpu_backend();
  const int T = 5, H = 577;
  auto x = random_vec(size_t(T * H), 2, -3, 3);
  auto w = random_vec(size_t(H), 3, 0.5, 1.5);
  std::vector<float> out(x.size());
  be->rms_norm(RmsNormParams{x.data(), nullptr, w.data(), out.data(), T, H, 1e-6f});
  for (int t = 0; t < T; ++t) {
    double inv = ref_rms_inv(&x[size_t(t * H)], H, 1e-6f);
    for (int i = 0; i < H; ++i) {
      double want = x[size_t(t * H + i)] * inv * w[size_t(i)];
      ASSERT_NEAR(out[size_t(t * H + i)], want, 1e-5 * std::abs(want) + 1e-6);
    }
  }
  std::vector<float> inplace = x;
  be->rms_norm(RmsNormParams{inplace.data(), nullptr, w.data(), inplace.data(), T, H, 1e-6f});
  EXPECT_EQ(inplace, out);
}

TEST(Ops, RmsNormFusedResidualAdd) {
  auto be = cpu_backend();
  const int T = 4, H = 64;
  auto x = random_vec(size_t(T * H), 4, -2, 2);
  auto res = random_vec(size_t(T * H), 5, -2, 2);
  auto w = random_vec(size_t(H), 6, 0.5, 1.5);
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + res[i];
  std::vector<float> r = res, out = x;  // out aliases x: vLLM's in-place form
  be->rms_norm(RmsNormParams{out.data(), r.data(), w.data(), out.data(), T, H, 1e-5f});
  EXPECT_EQ(r, sum);  // residual := x + residual
  for (int t = 0; t < T; ++t) {
    double inv = ref_rms_inv(&sum[size_t(t * H)], H, 1e-5f);
    for (int i = 0; i < H; ++i) {
      double want = sum[size_t(t * H + i)] * inv * w[size_t(i)];
      ASSERT_NEAR(out[size_t(t * H + i)], want, 1e-5 * std::abs(want) + 1e-6);
    }
  }
}

TEST(Ops, SiluMulUsesGateThenUpPacking) {
  auto be = cpu_backend();
  const int T = 3, I = 45;  // 45: 8-lane SIMD blocks and a scalar tail
  auto x = random_vec(size_t(T * 2 * I), 7, -6, 6);
  x[3] = 120.0f, x[4] = -120.0f, x[5] = 0.0f, x[6] = -0.0f, x[9] = 87.5f;  // exp range ends
  std::vector<float> out(size_t(T * I));
  be->silu_mul(SiluMulParams{x.data(), out.data(), T, I});
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < I; ++i) {
      double g = x[size_t(t * 2 * I + i)], u = x[size_t(t * 2 * I + I + i)];
      double want = g / (1.0 + std::exp(-g)) * u;
      ASSERT_NEAR(out[size_t(t * I + i)], want, 1e-5 * std::abs(want) + 1e-6);
    }
  }
}

// ---- KV cache write and copy_blocks --------------------------------------------

TEST(Ops, KvCacheWriteBySlotSkipsPadding) {
  auto be = cpu_backend();
  KvCacheSpec spec{1, 3, 8, 8, KvDtype::kF32};
  auto kv = be->create_kv_cache(spec, 5);
  ASSERT_TRUE(kv.ok());
  const KvCacheLayout L = kv->layout();
  float* kc = static_cast<float*>(kv->layer(0).k);
  float* vc = static_cast<float*>(kv->layer(0).v);
  const size_t n = size_t(L.layer_elements());
  std::fill(kc, kc + n, -7.0f);
  std::fill(vc, vc + n, -7.0f);
  const int T = 4, row = 2 * 3 * 8;  // fused k|v rows: stride 48, v at +24
  auto kvrows = random_vec(size_t(T * row), 13);
  std::vector<int64_t> slots = {39, -1, 0, 17};
  be->kv_cache_write(KvCacheWriteParams{kvrows.data(), kvrows.data() + 24, row, row, kc, vc, L,
                                        KvDtype::kF32, slots.data(), T});
  std::vector<float> want_k(n, -7.0f), want_v(n, -7.0f);
  for (int t = 0; t < T; ++t) {
    if (slots[size_t(t)] < 0) continue;
    int64_t block = slots[size_t(t)] / 8, off = slots[size_t(t)] % 8;
    for (int h = 0; h < 3; ++h) {
      for (int d = 0; d < 8; ++d) {
        size_t idx = size_t(((block * 3 + h) * 8 + off) * 8 + d);  // [blk][head][slot][dim]
        want_k[idx] = kvrows[size_t(t * row + h * 8 + d)];
        want_v[idx] = kvrows[size_t(t * row + 24 + h * 8 + d)];
      }
    }
  }
  EXPECT_EQ(std::vector<float>(kc, kc + n), want_k);
  EXPECT_EQ(std::vector<float>(vc, vc + n), want_v);
}

TEST(Ops, CopyBlocksAllLayersKAndV) {
  auto be = cpu_backend();
  KvCacheSpec spec{3, 2, 16, 8, KvDtype::kF32};
  auto kv = be->create_kv_cache(spec, 6);
  ASSERT_TRUE(kv.ok());
  const size_t n = size_t(kv->layout().layer_elements()), blk = size_t(kv->layout().block_stride());
  std::vector<std::vector<float>> before;
  for (int l = 0; l < 3; ++l) {
    for (void* p : {kv->layer(l).k, kv->layer(l).v}) {
      auto data = random_vec(n, uint32_t(20 + before.size()));
      std::memcpy(p, data.data(), n * sizeof(float));
      before.push_back(data);
    }
  }
  auto pairs_buf = be->allocate(4 * sizeof(int32_t));
  ASSERT_TRUE(pairs_buf.ok());
  const int32_t pairs[4] = {1, 4, 1, 5};  // one source, two destinations
  ASSERT_TRUE(be->upload(*pairs_buf, 0, pairs, sizeof(pairs)).ok());
  be->copy_blocks(kv->copy_blocks_params(pairs_buf->as<int32_t>(), 2));
  size_t which = 0;
  for (int l = 0; l < 3; ++l) {
    for (void* p : {kv->layer(l).k, kv->layer(l).v}) {
      auto want = before[which++];
      std::copy_n(want.begin() + 1 * blk, blk, want.begin() + 4 * blk);
      std::copy_n(want.begin() + 1 * blk, blk, want.begin() + 5 * blk);
      const float* got = static_cast<const float*>(p);
      EXPECT_EQ(std::vector<float>(got, got + n), want) << "layer " << l;
    }
  }
}

// Thread count must not change any bit (ops split work by rows only).
TEST(Ops, ResultsIndependentOfThreadCount) {
  const int T = 33, H = 2048;
  auto x = random_vec(size_t(T * H), 30);
  auto res = random_vec(size_t(T * H), 31);
  auto w = random_vec(size_t(H), 32);
  std::vector<std::vector<float>> outs;
  for (size_t threads : {1, 4}) {
    auto be = cpu_backend(threads);
    std::vector<float> r = res, out(x.size());
    be->rms_norm(RmsNormParams{x.data(), r.data(), w.data(), out.data(), T, H, 1e-5f});
    outs.push_back(out);
  }
  EXPECT_EQ(outs[0], outs[1]);
}


// ---- fused pairs ----------------------------------------------------------------

// Random Q4_1 blocks (scales in a sane range) for W[n, k].
std::vector<uint8_t> random_q4_1(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> raw(size_t(n * k / 32 * 20));
  for (auto& b : raw) b = uint8_t(rng());
  for (size_t b = 0; b < raw.size(); b += 20) {
    const uint16_t d = 0x2000 | uint16_t(rng() & 0x3FF), m = 0xA000 | uint16_t(rng() & 0x3FF);
    std::memcpy(&raw[b], &d, 2);
    std::memcpy(&raw[b + 2], &m, 2);
  }
  return raw;
}

// The CPU's fused norm+matmul and SiLU+matmul give the bits of the two ops in
// turn, for block weights in both layouts (fused: quantized in the norm's
// pass), F32 weights (not fusable: the fallback) and a bias.
TEST(Ops, FusedNormAndSiluMatmulEqualTheOpsInTurn) {
  auto be = cpu_backend();
  const int T = 5, H = 64, I = 96, N = 40;
  const std::vector<uint8_t> raw_h = random_q4_1(N, H, 3), raw_i = random_q4_1(N, I, 4);
  std::vector<uint8_t> packed_h, packed_i;
  const auto ph = cpu::pack_weight({WeightFormat::Q4_1, N, H, raw_h.data()}, packed_h);
  const auto pi = cpu::pack_weight({WeightFormat::Q4_1, N, I, raw_i.data()}, packed_i);
  ASSERT_TRUE(ph.ok() && pi.ok());
  const auto f32_h = random_vec(size_t(N * H), 5), bias = random_vec(size_t(N), 6);
  const LinearWeight weights_h[] = {{WeightFormat::Q4_1, N, H, raw_h.data()}, *ph,
                                    {WeightFormat::F32, N, H, f32_h.data()}};
  const auto x = random_vec(size_t(T * H), 7), res = random_vec(size_t(T * H), 8);
  const auto w = random_vec(size_t(H), 9, 0.5f, 1.5f), gu = random_vec(size_t(T * 2 * I), 10);
  for (const LinearWeight& wh : weights_h) {
    std::vector<float> r1 = res, r2 = res, n1(size_t(T * H)), n2(size_t(T * H));
    std::vector<float> y1(size_t(T * N)), y2(size_t(T * N));
    MatmulParams m1{n1.data(), H, wh, bias.data(), y1.data(), T}, m2 = m1;
    m2.x = n2.data(), m2.y = y2.data();
    be->rms_norm({x.data(), r1.data(), w.data(), n1.data(), T, H, 1e-5f});
    ASSERT_TRUE(be->matmul(m1).ok());
    ASSERT_TRUE(be->rms_norm_matmul({x.data(), r2.data(), w.data(), n2.data(), T, H, 1e-5f}, m2).ok());
    EXPECT_EQ(r1, r2);
    EXPECT_EQ(n1, n2);
    EXPECT_EQ(y1, y2) << format_name(wh.format);
  }
  for (const LinearWeight& wi : {LinearWeight{WeightFormat::Q4_1, N, I, raw_i.data()}, *pi}) {
    std::vector<float> s1(size_t(T * I)), s2(size_t(T * I)), y1(size_t(T * N)), y2(size_t(T * N));
    MatmulParams m1{s1.data(), I, wi, nullptr, y1.data(), T}, m2 = m1;
    m2.x = s2.data(), m2.y = y2.data();
    be->silu_mul({gu.data(), s1.data(), T, I});
    ASSERT_TRUE(be->matmul(m1).ok());
    ASSERT_TRUE(be->silu_mul_matmul({gu.data(), s2.data(), T, I}, m2).ok());
    EXPECT_EQ(s1, s2);
    EXPECT_EQ(y1, y2);
  }
  // A matmul that does not read the op's output is not fused (and still right).
  std::vector<float> other = x, n3(size_t(T * H)), y3(size_t(T * N)), y4(size_t(T * N));
  MatmulParams m3{other.data(), H, *ph, nullptr, y3.data(), T};
  std::vector<float> r3 = res;
  ASSERT_TRUE(be->rms_norm_matmul({x.data(), r3.data(), w.data(), n3.data(), T, H, 1e-5f}, m3).ok());
  MatmulParams m4 = m3;
  m4.y = y4.data();
  ASSERT_TRUE(be->matmul(m4).ok());
  EXPECT_EQ(y3, y4);
}

TEST(Ops, FusedRopeAndKvWriteEqualTheOpsInTurn) {
  auto be = cpu_backend();
  KvCacheSpec spec{1, 2, 8, 16, KvDtype::kF32};
  auto kv1 = be->create_kv_cache(spec, 4), kv2 = be->create_kv_cache(spec, 4);
  ASSERT_TRUE(kv1.ok() && kv2.ok());
  const KvCacheLayout L = kv1->layout();
  const size_t n = size_t(L.layer_elements());
  for (auto* kv : {&*kv1, &*kv2}) {
    std::fill_n(static_cast<float*>(kv->layer(0).k), n, -7.0f);
    std::fill_n(static_cast<float*>(kv->layer(0).v), n, -7.0f);
  }
  const int T = 37, Hq = 4, Hk = 2, D = 16, row = (Hq + 2 * Hk) * D;
  auto rows1 = random_vec(size_t(T * row), 11);
  auto rows2 = rows1;
  std::vector<int32_t> pos(T);
  std::vector<int64_t> slots(T);
  for (int t = 0; t < T; ++t) pos[size_t(t)] = 3 * t + 1, slots[size_t(t)] = t == 5 ? -1 : (t * 7) % 32;
  std::vector<float> inv(D / 2);
  for (int i = 0; i < D / 2; ++i) inv[size_t(i)] = std::pow(10000.0f, -2.0f * i / D);
  auto run = [&](std::vector<float>& rows, KvCache& kv, bool fused) {
    float* q = rows.data();
    float* k = q + Hq * D;
    RopeParams r{q, k, pos.data(), inv.data(), row, row, T, Hq, Hk, D, D, RopeStyle::kNeox};
    KvCacheWriteParams w{k, k + Hk * D, row, row, kv.layer(0).k, kv.layer(0).v, L, KvDtype::kF32,
                         slots.data(), T};
    if (fused) {
      be->rope_kv_write(r, w);
    } else {
      be->rope(r);
      be->kv_cache_write(w);
    }
  };
  run(rows1, *kv1, false);
  run(rows2, *kv2, true);
  EXPECT_EQ(rows1, rows2);
  const float* k1 = static_cast<const float*>(kv1->layer(0).k);
  const float* k2 = static_cast<const float*>(kv2->layer(0).k);
  const float* v1 = static_cast<const float*>(kv1->layer(0).v);
  const float* v2 = static_cast<const float*>(kv2->layer(0).v);
  EXPECT_EQ(std::vector<float>(k1, k1 + n), std::vector<float>(k2, k2 + n));
  EXPECT_EQ(std::vector<float>(v1, v1 + n), std::vector<float>(v2, v2 + n));
}

}  // namespace
}  // namespace pagoda::gpu
