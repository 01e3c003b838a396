// CUDA backend basics and the elementwise ops against their CPU twins
// (gpu/cpu) on the same random inputs: embedding, RMSNorm (plain, fused
// residual, in place), RoPE (NeoX/interleaved, partial rotary, llama3 table,
// fused-QKV strides, k == nullptr), SiLU*mul, KV cache write (F32 exact, BF16
// = round-to-nearest-even of the F32 cache; padding rows and untouched slots
// keep their poison) and copy_blocks (all layers, K and V). Exact ops are
// compared bitwise; the others within fp32 tolerances (FMA contraction and
// summation order differ between nvcc and g++). Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <algorithm>
#include <limits>
#include <random>

#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaBackendTest = CudaTest;
using CudaOps = CudaTest;

TEST_F(CudaBackendTest, IdentityAndTransfers) {
  EXPECT_EQ(gpu_->kind(), BackendKind::kCuda);
  EXPECT_FALSE(gpu_->host_accessible());
  EXPECT_NE(gpu_->name().find("cuda"), std::string_view::npos);
  EXPECT_GT(gpu_->sm_count(), 0);
  auto empty = gpu_->allocate(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 3);
  DeviceBuffer buf = put(*gpu_, data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 256, 0u);
  std::vector<uint8_t> part(100);
  ASSERT_TRUE(gpu_->download(buf, 450, part.data(), 100).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + 450));
  ASSERT_TRUE(gpu_->upload(buf, 10, part.data(), 100).ok());
  auto back = get<uint8_t>(*gpu_, buf, 1000);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), back.begin() + 10));
  EXPECT_EQ(back[9], data[9]);
  EXPECT_EQ(back[110], data[110]);
  EXPECT_FALSE(gpu_->upload(buf, 950, part.data(), 100).ok());
  EXPECT_FALSE(gpu_->download(buf, 1001, part.data(), 0).ok());
  auto mem = gpu_->memory_info();
  ASSERT_TRUE(mem.ok()) << mem.error().message;
  EXPECT_GT(mem->total_bytes, mem->free_bytes);
}

TEST_F(CudaBackendTest, MemoryLimitAndRelease) {
  auto limited = cuda::CudaBackend::create(BackendOptions{1 << 20, 0});
  ASSERT_TRUE(limited.ok()) << limited.error().message;
  auto& be = **limited;
  {
    auto a = be.allocate(600 << 10);
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(be.allocate(600 << 10).ok());
    EXPECT_EQ(be.allocated_bytes(), uint64_t{600} << 10);
  }
  EXPECT_EQ(be.allocated_bytes(), 0u);
  EXPECT_TRUE(be.allocate(1 << 20).ok());
  auto huge = gpu_->allocate(size_t{1} << 50);  // 1 PiB: cudaMalloc refuses
  EXPECT_FALSE(huge.ok());
  EXPECT_TRUE(gpu_->check().ok()) << "a failed allocation must not poison later checks";
}

TEST_F(CudaBackendTest, FactoryAndKvCache) {
  auto base = cuda::make_cuda_backend(BackendOptions{});
  ASSERT_TRUE(base.ok()) << base.error().message;
  EXPECT_EQ((*base)->kind(), BackendKind::kCuda);
  KvCacheSpec spec{4, 3, 64, 16, KvDtype::kBF16};
  auto cache = gpu_->create_kv_cache(spec, 10);
  ASSERT_TRUE(cache.ok()) << cache.error().message;
  EXPECT_EQ(cache->num_blocks(), 10);
  EXPECT_NE(cache->layer(3).k, nullptr);
  EXPECT_NE(cache->layer(3).k, cache->layer(3).v);
}

TEST_F(CudaBackendTest, UnsupportedShapeIsReportedNotFatal) {
  PagedAttentionParams p;
  p.layout = KvCacheLayout{1, 96, 16, 1};  // head_dim 96: not supported
  p.num_q_heads = 1;
  p.meta.num_tokens = 1;
  gpu_->paged_attention(p);
  auto err = gpu_->check();
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().message.find("head_dim"), std::string::npos) << err.error().message;
  EXPECT_TRUE(gpu_->check().ok()) << "the error is reported once";
}

TEST_F(CudaOps, EmbeddingMatchesCpuBitwise) {
  const int32_t V = 1000, H = 576;
  const std::vector<int32_t> ids = {0, 999, -1, 1000, 17, 17, 523, 2000000};
  const auto table = random_vec(size_t(V) * H, 1);
  std::vector<float> out[2];
  Backend* bes[2] = {cpu_.get(), gpu_.get()};
  for (int b = 0; b < 2; ++b) {
    DeviceBuffer t = put(*bes[b], table), i = put(*bes[b], ids);
    DeviceBuffer o = put(*bes[b], std::vector<float>(ids.size() * H, 7.0f));
    bes[b]->embedding({t.as<const float>(), i.as<const int32_t>(), o.as<float>(),
                       int32_t(ids.size()), H, V});
    out[b] = get<float>(*bes[b], o, ids.size() * H);
  }
  expect_bitwise(out[1], out[0], "embedding");
  EXPECT_EQ(out[1][2 * H + 5], 0.0f);
  EXPECT_EQ(out[1][1 * H + 5], table[size_t(999) * H + 5]);
}

// RMSNorm on both backends: returns {out, residual}.
std::pair<std::vector<float>, std::vector<float>> run_rms(Backend& be, const std::vector<float>& x,
                                                          const std::vector<float>* residual,
                                                          const std::vector<float>& w, int T,
                                                          int H, bool in_place) {
  DeviceBuffer xb = put(be, x), wb = put(be, w);
  DeviceBuffer rb = residual ? put(be, *residual) : DeviceBuffer();
  DeviceBuffer ob = in_place ? DeviceBuffer() : put(be, std::vector<float>(x.size(), 0.0f));
  float* out = in_place ? xb.as<float>() : ob.as<float>();
  be.rms_norm({xb.as<const float>(), rb.as<float>(), wb.as<const float>(), out, T, H, 1e-5f});
  auto o = get<float>(be, in_place ? xb : ob, x.size());
  auto r = residual ? get<float>(be, rb, x.size()) : std::vector<float>();
  return {o, r};
}

TEST_F(CudaOps, RmsNormMatchesCpu) {
  for (int H : {1, 33, 576, 4096}) {
    for (int mode = 0; mode < 3; ++mode) {  // plain, fused residual, in place
      const int T = 5;
      auto x = random_vec(size_t(T) * H, uint32_t(H + mode), -3.0f, 3.0f);
      auto res = random_vec(x.size(), uint32_t(H * 7 + mode));
      auto w = random_vec(size_t(H), uint32_t(H * 3), 0.5f, 1.5f);
      const std::vector<float>* r = mode == 1 ? &res : nullptr;
      auto want = run_rms(*cpu_, x, r, w, T, H, mode == 2);
      auto got = run_rms(*gpu_, x, r, w, T, H, mode == 2);
      const std::string label = "rms_norm H=" + std::to_string(H) + " mode=" + std::to_string(mode);
      expect_close(got.first, want.first, 1e-7, 2e-6, label);
      if (r) expect_bitwise(got.second, want.second, label + " residual");
    }
  }
}

struct RopeCase {
  RopeStyle style;
  int rotary;
  RopeScaling scaling;
  bool with_k;
};

std::vector<float> run_rope(Backend& be, const RopeCase& c, const std::vector<float>& qkv,
                            const std::vector<int32_t>& pos, int Hq, int Hk, int D) {
  RopeConfig cfg;
  cfg.head_dim = D;
  cfg.rotary_dim = c.rotary;
  cfg.theta = 500000.0f;
  cfg.style = c.style;
  cfg.scaling = c.scaling;
  cfg.factor = 8.0f;
  auto table = be.create_rope_table(cfg);
  EXPECT_TRUE(table.ok());
  DeviceBuffer buf = put(be, qkv), pb = put(be, pos);
  const int64_t stride = int64_t{Hq + 2 * Hk} * D;  // a fused QKV row
  float* q = buf.as<float>();
  float* k = c.with_k ? q + int64_t{Hq} * D : nullptr;
  be.rope(table->params(q, stride, k, stride, pb.as<const int32_t>(), int32_t(pos.size()), Hq, Hk));
  return get<float>(be, buf, qkv.size());
}

TEST_F(CudaOps, RopeMatchesCpu) {
  const int Hq = 9, Hk = 3, D = 64;
  const std::vector<int32_t> pos = {0, 1, 2, 17, 100, 4095, 8191, 131071};
  auto qkv = random_vec(pos.size() * size_t(Hq + 2 * Hk) * D, 11, -2.0f, 2.0f);
  const RopeCase cases[] = {{RopeStyle::kNeox, 64, RopeScaling::kNone, true},
                            {RopeStyle::kInterleaved, 64, RopeScaling::kNone, true},
                            {RopeStyle::kNeox, 32, RopeScaling::kLinear, true},
                            {RopeStyle::kInterleaved, 64, RopeScaling::kLlama3, true},
                            {RopeStyle::kNeox, 64, RopeScaling::kLlama3, false}};
  for (const RopeCase& c : cases) {
    const std::string label = "rope style=" + std::to_string(int(c.style)) + " rot=" +
                              std::to_string(c.rotary) + " scaling=" +
                              std::to_string(int(c.scaling)) + " k=" + std::to_string(c.with_k);
    auto want = run_rope(*cpu_, c, qkv, pos, Hq, Hk, D);
    auto got = run_rope(*gpu_, c, qkv, pos, Hq, Hk, D);
    expect_close(got, want, 4e-6, 2e-6, label);
    // Untouched: v, k when absent, dims past rotary_dim (compare with the input).
    const size_t row = size_t(Hq + 2 * Hk) * D;
    for (size_t t = 0; t < pos.size(); ++t) {
      for (size_t e = 0; e < row; ++e) {
        const size_t head = e / D, d = e % D;
        const bool rotated = (head < size_t(Hq) || (c.with_k && head < size_t(Hq + Hk))) &&
                             d < size_t(c.rotary);
        if (!rotated && got[t * row + e] != qkv[t * row + e]) {
          ADD_FAILURE() << label << ": element " << e << " of token " << t << " changed";
          return;
        }
      }
    }
  }
}

TEST_F(CudaOps, SiluMulMatchesCpu) {
  const int T = 7, I = 1536;
  auto x = random_vec(size_t(T) * 2 * I, 5, -12.0f, 12.0f);
  x[3] = -90.0f;  // exp overflow side
  x[4] = 90.0f;
  std::vector<float> out[2];
  Backend* bes[2] = {cpu_.get(), gpu_.get()};
  for (int b = 0; b < 2; ++b) {
    DeviceBuffer xb = put(*bes[b], x), ob = put(*bes[b], std::vector<float>(size_t(T) * I));
    bes[b]->silu_mul({xb.as<const float>(), ob.as<float>(), T, I});
    out[b] = get<float>(*bes[b], ob, size_t(T) * I);
  }
  expect_close(out[1], out[0], 1e-37, 2e-6, "silu_mul");
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaOps, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
