// The CUDA decode path's fused kernels (issue 25 item 4) against the CPU
// backend and their unfused CUDA twins (the GEMV itself:
// tests/cuda_gemv_gpu_test.cpp):
//  - rms_norm_matmul / silu_mul_matmul (the producer writes the bf16 input):
//    bitwise the two ops run separately on CUDA (out, residual and y), for
//    M in {1, 5, 8} (GEMV) and {9, 40} (cuBLAS), and close to the CPU's pair.
//  - with BackendOptions::decode_kernels off the pair still computes the
//    same (cuBLAS, ops in turn; close, not bitwise).
//  - rope_kv_write (one kernel): bitwise rope then kv_cache_write on CUDA (q,
//    k, v and both caches, F32 and BF16, padding slots), close to the CPU's.
//  - paged_attention_matmul (the attention kernels and the split-K merge
//    write the o projection's bf16 input): bitwise the two ops, 5 decode
//    rows (GEMV) and a mixed batch (cuBLAS), split and unsplit; close to CPU.
//  - split-K: rows with one partition are written directly (bitwise the
//    unsplit kernel), multi-partition rows merged, padding rows zero.
// Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include "tests/attention_problem.hpp"
#include "tests/cuda_decode_test_util.hpp"
#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaFusedDecode = CudaTest;

// ---- fused producers ----------------------------------------------------------------

struct PairOut {
  std::vector<float> out, residual, y;
};

// rms_norm(+residual) -> matmul over W [N, H], fused or as two ops.
PairOut run_norm_matmul(Backend& be, bool fused, const std::vector<float>& x,
                        const std::vector<float>& res, const std::vector<float>& gain,
                        const std::vector<uint16_t>& w, int32_t T, int32_t H, int64_t N) {
  DeviceBuffer wb, xb = put(be, x), rb = put(be, res), gb = put(be, gain),
               ob = put(be, std::vector<float>(x.size(), NAN)),
               yb = put(be, std::vector<float>(size_t(T * N), NAN));
  const RmsNormParams n{xb.as<const float>(), rb.as<float>(), gb.as<const float>(),
                        ob.as<float>(), T, H, 1e-5f};
  const MatmulParams mm{ob.as<const float>(), H, weight_on(be, w, N, H, wb), nullptr,
                        yb.as<float>(), T};
  if (fused) {
    EXPECT_TRUE(be.rms_norm_matmul(n, mm).ok());
  } else {
    be.rms_norm(n);
    EXPECT_TRUE(be.matmul(mm).ok());
  }
  return {get<float>(be, ob, x.size()), get<float>(be, rb, x.size()),
          get<float>(be, yb, size_t(T * N))};
}

// silu_mul -> matmul over W [N, I], fused or as two ops.
PairOut run_silu_matmul(Backend& be, bool fused, const std::vector<float>& x,
                        const std::vector<uint16_t>& w, int32_t T, int32_t I, int64_t N) {
  DeviceBuffer wb, xb = put(be, x),
               ob = put(be, std::vector<float>(size_t(T) * I, NAN)),
               yb = put(be, std::vector<float>(size_t(T * N), NAN));
  const SiluMulParams s{xb.as<const float>(), ob.as<float>(), T, I};
  const MatmulParams mm{ob.as<const float>(), I, weight_on(be, w, N, I, wb), nullptr,
                        yb.as<float>(), T};
  if (fused) {
    EXPECT_TRUE(be.silu_mul_matmul(s, mm).ok());
  } else {
    be.silu_mul(s);
    EXPECT_TRUE(be.matmul(mm).ok());
  }
  return {get<float>(be, ob, size_t(T) * I), {}, get<float>(be, yb, size_t(T * N))};
}

TEST_F(CudaFusedDecode, RmsNormMatmulEqualsTwoOpsBitwise) {
  const int32_t H = 576;
  const int64_t N = 1536;
  const auto w = random_bf16(size_t(N * H), 21);
  const auto gain = random_vec(size_t(H), 22, 0.5f, 1.5f);
  for (int32_t T : {1, 5, 8, 9, 40}) {
    const auto x = random_vec(size_t(T) * H, uint32_t(T), -3.0f, 3.0f);
    const auto res = random_vec(x.size(), uint32_t(T + 100), -3.0f, 3.0f);
    const std::string label = "rms_norm_matmul T=" + std::to_string(T);
    const PairOut fused = run_norm_matmul(*gpu_, true, x, res, gain, w, T, H, N);
    const PairOut plain = run_norm_matmul(*gpu_, false, x, res, gain, w, T, H, N);
    expect_bitwise(fused.out, plain.out, label + " out");
    expect_bitwise(fused.residual, plain.residual, label + " residual");
    expect_bitwise(fused.y, plain.y, label + " y");
    const PairOut cpu = run_norm_matmul(*cpu_, true, x, res, gain, w, T, H, N);
    expect_close(fused.out, cpu.out, 1e-7, 2e-6, label + " out vs cpu");
    std::vector<double> want(cpu.y.begin(), cpu.y.end());
    expect_within(fused.y, want, magnitudes(cpu.out, w, T, N, H), 1.0 / 128, label + " y vs cpu");
  }
}

TEST_F(CudaFusedDecode, DecodeKernelsOffStillComputesThePair) {
  // BackendOptions::decode_kernels = false (PAGODA_CUDA_DECODE_KERNELS=off):
  // the ops in turn and cuBLAS; the same values up to the summation order.
  BackendOptions o = backend_options();
  o.decode_kernels = false;
  auto plain_be = cuda::CudaBackend::create(o);
  ASSERT_TRUE(plain_be.ok()) << plain_be.error().message;
  const int32_t H = 576, T = 3;
  const int64_t N = 200;
  const auto w = random_bf16(size_t(N * H), 61);
  const auto gain = random_vec(size_t(H), 62, 0.5f, 1.5f);
  const auto x = random_vec(size_t(T) * H, 63, -3.0f, 3.0f);
  const auto res = random_vec(x.size(), 64, -3.0f, 3.0f);
  const PairOut on = run_norm_matmul(*gpu_, true, x, res, gain, w, T, H, N);
  const PairOut off = run_norm_matmul(**plain_be, true, x, res, gain, w, T, H, N);
  expect_bitwise(off.out, on.out, "decode kernels off: out");
  std::vector<double> want(off.y.begin(), off.y.end());
  std::vector<float> rounded(on.out.size());
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = round_bf16(on.out[i]);
  expect_within(on.y, want, magnitudes(rounded, w, T, N, H), 1e-5, "decode kernels off: y");
  EXPECT_TRUE((*plain_be)->check().ok());
}

TEST_F(CudaFusedDecode, SiluMulMatmulEqualsTwoOpsBitwise) {
  const int32_t I = 1536;
  const int64_t N = 576;
  const auto w = random_bf16(size_t(N * I), 31);
  for (int32_t T : {1, 5, 8, 9, 40}) {
    const auto x = random_vec(size_t(T) * 2 * I, uint32_t(T + 7), -6.0f, 6.0f);
    const std::string label = "silu_mul_matmul T=" + std::to_string(T);
    const PairOut fused = run_silu_matmul(*gpu_, true, x, w, T, I, N);
    const PairOut plain = run_silu_matmul(*gpu_, false, x, w, T, I, N);
    expect_bitwise(fused.out, plain.out, label + " out");
    expect_bitwise(fused.y, plain.y, label + " y");
    const PairOut cpu = run_silu_matmul(*cpu_, true, x, w, T, I, N);
    expect_close(fused.out, cpu.out, 1e-37, 2e-6, label + " out vs cpu");
    std::vector<double> want(cpu.y.begin(), cpu.y.end());
    expect_within(fused.y, want, magnitudes(cpu.out, w, T, N, I), 1.0 / 128, label + " y vs cpu");
  }
}

struct RopeKvOut {
  std::vector<float> qkv, kc, vc;  // caches widened to fp32
};

// rope over a fused QKV buffer, then the K/V write; fused or as two ops.
RopeKvOut run_rope_kv(Backend& be, bool fused, KvDtype dtype, const std::vector<float>& qkv,
                      const std::vector<int32_t>& pos, const std::vector<int64_t>& slots) {
  const int Hq = 9, Hk = 3, D = 64, T = int(pos.size());
  const KvCacheLayout L{Hk, D, 16, 8};
  const size_t elems = size_t(L.layer_elements());
  RopeConfig cfg;
  cfg.head_dim = D;
  cfg.theta = 500000.0f;
  cfg.style = RopeStyle::kInterleaved;
  auto table = be.create_rope_table(cfg);
  EXPECT_TRUE(table.ok());
  DeviceBuffer buf = put(be, qkv), pb = put(be, pos), sb = put(be, slots);
  DeviceBuffer kc = put(be, std::vector<float>(elems, -7.0f)), vc = put(be, std::vector<float>(elems, -7.0f));
  const int64_t stride = int64_t{Hq + 2 * Hk} * D;
  float* q = buf.as<float>();
  const RopeParams r = table->params(q, stride, q + Hq * D, stride, pb.as<const int32_t>(), T, Hq, Hk);
  KvCacheWriteParams w{q + Hq * D, q + (Hq + Hk) * D, stride, stride, kc.data(), vc.data(),
                       L, dtype, sb.as<const int64_t>(), T};
  if (fused) {
    be.rope_kv_write(r, w);
  } else {
    be.rope(r);
    be.kv_cache_write(w);
  }
  RopeKvOut o{get<float>(be, buf, qkv.size()), {}, {}};
  if (dtype == KvDtype::kF32) {
    o.kc = get<float>(be, kc, elems);
    o.vc = get<float>(be, vc, elems);
  } else {  // the first half of each buffer holds the bf16 cache
    for (auto [dev, host] : {std::pair{&kc, &o.kc}, std::pair{&vc, &o.vc}}) {
      for (uint16_t b : get<uint16_t>(be, *dev, elems)) host->push_back(bf16_to_fp32(b));
    }
  }
  return o;
}

TEST_F(CudaFusedDecode, RopeKvWriteEqualsTwoOpsBitwise) {
  const std::vector<int32_t> pos = {0, 1, 17, 100, 4095, 8191};
  const std::vector<int64_t> slots = {5, -1, 16, 127, 40, 0};
  const auto qkv = random_vec(pos.size() * 15 * 64, 41, -2.0f, 2.0f);
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
    const std::string label = dtype == KvDtype::kF32 ? "rope_kv_write f32" : "rope_kv_write bf16";
    const RopeKvOut fused = run_rope_kv(*gpu_, true, dtype, qkv, pos, slots);
    const RopeKvOut plain = run_rope_kv(*gpu_, false, dtype, qkv, pos, slots);
    expect_bitwise(fused.qkv, plain.qkv, label + " qkv");
    expect_bitwise(fused.kc, plain.kc, label + " k cache");
    expect_bitwise(fused.vc, plain.vc, label + " v cache");
    if (dtype == KvDtype::kF32) {
      const RopeKvOut cpu = run_rope_kv(*cpu_, true, dtype, qkv, pos, slots);
      expect_close(fused.qkv, cpu.qkv, 4e-6, 2e-6, label + " qkv vs cpu");
      expect_close(fused.kc, cpu.kc, 4e-6, 2e-6, label + " k cache vs cpu");
      expect_bitwise(fused.vc, cpu.vc, label + " v cache vs cpu");
    }
  }
}

// ---- split-K: the merge only for rows with more than one partition ------------------

TEST_F(CudaFusedDecode, SplitKSinglePartitionRowsWrittenDirectly) {
  const std::vector<Seq> seqs = {{1, 1}, {15, 1}, {64, 1}, {65, 1}, {200, 1}, {64, 1}};
  const Problem p = make_problem({8, 2, 128, 16}, seqs, 2, 77, Values::kBf16);
  const size_t row = size_t(p.sh.Hq) * p.sh.D;
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
    const auto unsplit = run_attention(*gpu_, p, dtype, 0);
    const auto split = run_attention(*gpu_, p, dtype, 64);
    for (size_t s = 0; s < seqs.size(); ++s) {
      const std::vector<float> a(split.begin() + ptrdiff_t(s * row), split.begin() + ptrdiff_t((s + 1) * row));
      const std::vector<float> b(unsplit.begin() + ptrdiff_t(s * row), unsplit.begin() + ptrdiff_t((s + 1) * row));
      const std::string label = "ctx " + std::to_string(seqs[s].ctx);
      if (seqs[s].ctx <= 64) {
        expect_bitwise(a, b, label + ": one partition, written directly");
      } else {
        expect_close(a, b, kAttnAtol, kAttnRtol, label + ": merged partitions");
      }
    }
    for (size_t i = seqs.size() * row; i < split.size(); ++i) {
      ASSERT_EQ(split[i], 0.0f) << "padding output " << i;
    }
    // max_context_len <= P: no merge launch at all; everything bitwise unsplit.
    const Problem shortp = make_problem({8, 2, 128, 16}, {{1, 1}, {15, 1}, {64, 1}}, 1, 78, Values::kBf16);
    expect_bitwise(run_attention(*gpu_, shortp, dtype, 64), run_attention(*gpu_, shortp, dtype, 0),
                   "all rows single-partition");
  }
}

// paged_attention -> o projection, fused (the attention kernels write the
// bf16 input) or as two ops: y and the attention output bitwise equal.
std::pair<std::vector<float>, std::vector<float>> run_attention_matmul(
    Backend& be, bool fused, const Problem& p, int partition, const std::vector<uint16_t>& w,
    int64_t N) {
  const int64_t K = int64_t{p.sh.Hq} * p.sh.D;
  DeviceBuffer q = put(be, p.q), tables = put(be, p.tables), qsl = put(be, p.qsl),
               ctx = put(be, p.ctx), out = put(be, std::vector<float>(p.q.size(), kNaN)), wb,
               yb = put(be, std::vector<float>(size_t(p.T * N), kNaN));
  // The CPU cache is F32; the values are bf16-representable (Values::kBf16).
  const bool cuda = be.kind() == BackendKind::kCuda;
  DeviceBuffer kc = cuda ? put(be, to_bf16(p.kc)) : put(be, p.kc);
  DeviceBuffer vc = cuda ? put(be, to_bf16(p.vc)) : put(be, p.vc);
  const AttentionIo io{q.as<const float>(), kc.data(), vc.data(), tables.as<const int32_t>(),
                       qsl.as<const int32_t>(), ctx.as<const int32_t>(), out.as<float>()};
  const PagedAttentionParams a =
      attention_params(p, io, cuda ? KvDtype::kBF16 : KvDtype::kF32, partition);
  const MatmulParams mm{out.as<const float>(), K, weight_on(be, w, N, K, wb), nullptr,
                        yb.as<float>(), p.T};
  if (fused) {
    EXPECT_TRUE(be.paged_attention_matmul(a, mm).ok());
  } else {
    be.paged_attention(a);
    EXPECT_TRUE(be.matmul(mm).ok());
  }
  return {get<float>(be, out, p.q.size()), get<float>(be, yb, size_t(p.T * N))};
}

TEST_F(CudaFusedDecode, AttentionMatmulEqualsTwoOpsBitwise) {
  const int64_t N = 96;
  const auto w = random_bf16(size_t(N) * 8 * 128, 51);
  const Problem decode5 = make_problem({8, 2, 128, 16}, {{1, 1}, {40, 1}, {300, 1}, {97, 1}}, 1, 52,
                                       Values::kBf16);
  const Problem mixed = make_problem({8, 2, 128, 16}, mixed_seqs(16), 2, 53, Values::kBf16);
  for (const Problem* p : {&decode5, &mixed}) {  // 5 rows: GEMV; 95 rows: cuBLAS
    for (int P : {0, 64}) {
      const std::string label = "T=" + std::to_string(p->T) + " partition " + std::to_string(P);
      const auto fused = run_attention_matmul(*gpu_, true, *p, P, w, N);
      const auto plain = run_attention_matmul(*gpu_, false, *p, P, w, N);
      expect_bitwise(fused.first, plain.first, label + " attention out");
      expect_bitwise(fused.second, plain.second, label + " y");
      const auto cpu = run_attention_matmul(*cpu_, true, *p, 0, w, N);
      expect_close(fused.first, cpu.first, kAttnAtol, kAttnRtol, label + " attention vs cpu");
      std::vector<double> want(cpu.second.begin(), cpu.second.end());
      expect_within(fused.second, want, magnitudes(cpu.first, w, p->T, N, 8 * 128), 1.0 / 128,
                    label + " y vs cpu");
    }
  }
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaFusedDecode, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
