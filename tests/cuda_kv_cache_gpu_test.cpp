// CUDA KV-cache ops against the CPU twin and a host model: kv_cache_write
// (F32 bitwise equal to the CPU twin; BF16 equal to the round-to-nearest-even
// of it; padding rows skipped; unwritten slots keep their poison bits) and
// copy_blocks over every layer of a KvCache made by the backend (its device
// table of layer pointers), F32 and BF16. Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <cuda_runtime.h>

#include <random>

#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

constexpr uint32_t kPoisonF32 = 0x7FC00DADu;  // a quiet NaN
constexpr uint16_t kPoisonBf16 = 0x7FC1u;

using CudaKvCache = CudaTest;

std::vector<float> poison_f32(size_t n) {
  float p;
  std::memcpy(&p, &kPoisonF32, 4);
  return std::vector<float>(n, p);
}

bool is_poison(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u == kPoisonF32;
}

TEST_F(CudaKvCache, WriteBySlotF32AndBf16) {
  const int Hq = 9, Hk = 3, D = 64, BS = 16, T = 10;
  const int64_t blocks = 6;
  const KvCacheLayout L{Hk, D, BS, blocks};
  const std::vector<int64_t> slots = {5, -1, 16, 17, 95, 40, -1, 0, 63, 31};
  const int64_t stride = int64_t{Hq + 2 * Hk} * D;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> qkv(size_t(T * stride));
  for (auto& x : qkv) x = u(rng);
  const size_t cache_elems = size_t(L.layer_elements());

  // CPU twin, F32.
  DeviceBuffer cq = put(*cpu_, qkv), cs = put(*cpu_, slots);
  DeviceBuffer ck = put(*cpu_, poison_f32(cache_elems)), cv = put(*cpu_, poison_f32(cache_elems));
  KvCacheWriteParams p;
  p.k = cq.as<const float>() + int64_t{Hq} * D;
  p.v = cq.as<const float>() + int64_t{Hq + Hk} * D;
  p.k_stride = p.v_stride = stride;
  p.k_cache = ck.data();
  p.v_cache = cv.data();
  p.layout = L;
  p.slot_mapping = cs.as<const int64_t>();
  p.num_tokens = T;
  cpu_->kv_cache_write(p);
  const auto want_k = get<float>(*cpu_, ck, cache_elems);
  const auto want_v = get<float>(*cpu_, cv, cache_elems);
  size_t written = 0;
  for (float x : want_k) written += is_poison(x) ? 0 : 1;
  ASSERT_EQ(written, size_t(8 * Hk * D)) << "the CPU twin should write 8 tokens";

  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
    DeviceBuffer gq = put(*gpu_, qkv), gs = put(*gpu_, slots);
    DeviceBuffer gk, gv;
    if (dtype == KvDtype::kF32) {
      gk = put(*gpu_, poison_f32(cache_elems));
      gv = put(*gpu_, poison_f32(cache_elems));
    } else {
      gk = put(*gpu_, std::vector<uint16_t>(cache_elems, kPoisonBf16));
      gv = put(*gpu_, std::vector<uint16_t>(cache_elems, kPoisonBf16));
    }
    KvCacheWriteParams g = p;
    g.k = gq.as<const float>() + int64_t{Hq} * D;
    g.v = gq.as<const float>() + int64_t{Hq + Hk} * D;
    g.k_cache = gk.data();
    g.v_cache = gv.data();
    g.slot_mapping = gs.as<const int64_t>();
    g.dtype = dtype;
    gpu_->kv_cache_write(g);
    if (dtype == KvDtype::kF32) {
      expect_bitwise(get<float>(*gpu_, gk, cache_elems), want_k, "k f32");
      expect_bitwise(get<float>(*gpu_, gv, cache_elems), want_v, "v f32");
    } else {
      for (int kv = 0; kv < 2; ++kv) {
        const auto& want32 = kv == 0 ? want_k : want_v;
        std::vector<uint16_t> want(cache_elems);
        for (size_t i = 0; i < cache_elems; ++i) {
          want[i] = is_poison(want32[i]) ? kPoisonBf16 : fp32_to_bf16(want32[i]);
        }
        expect_bitwise(get<uint16_t>(*gpu_, kv == 0 ? gk : gv, cache_elems), want,
                       kv == 0 ? "k bf16" : "v bf16");
      }
    }
  }
}

TEST_F(CudaKvCache, CopyBlocksEveryLayer) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
    const KvCacheSpec spec{3, 2, 64, 8, dtype};
    const int64_t blocks = 8;
    auto cache = gpu_->create_kv_cache(spec, blocks);
    ASSERT_TRUE(cache.ok()) << cache.error().message;
    const size_t bytes = size_t(spec.layout(blocks).layer_elements() * kv_dtype_bytes(dtype));
    const size_t block_bytes = bytes / size_t(blocks);
    std::mt19937 rng(uint32_t(dtype) + 9);
    std::vector<std::vector<uint8_t>> images;  // per layer, K then V
    for (int l = 0; l < 2 * spec.num_layers; ++l) {
      std::vector<uint8_t> img(bytes);
      for (auto& b : img) b = uint8_t(rng() & 0x7Fu);  // finite values either way
      const KvLayerView view = cache->layer(l % spec.num_layers);
      void* base = l < spec.num_layers ? view.k : view.v;
      EXPECT_EQ(cudaMemcpy(base, img.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
      images.push_back(std::move(img));
    }
    // cudaMemcpy runs on the legacy stream, which the backend's non-blocking
    // stream does not wait for: finish it before issuing the op.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> pairs = {0, 5, 2, 6, 7, 1};
    DeviceBuffer pb = put(*gpu_, pairs);
    gpu_->copy_blocks(cache->copy_blocks_params(pb.as<const int32_t>(), 3));
    ASSERT_TRUE(gpu_->check().ok());
    for (int l = 0; l < 2 * spec.num_layers; ++l) {
      std::vector<uint8_t> want = images[size_t(l)];
      for (size_t i = 0; i < pairs.size(); i += 2) {
        std::memcpy(want.data() + size_t(pairs[i + 1]) * block_bytes,
                    images[size_t(l)].data() + size_t(pairs[i]) * block_bytes, block_bytes);
      }
      std::vector<uint8_t> got(bytes);
      const KvLayerView view = cache->layer(l % spec.num_layers);
      EXPECT_EQ(cudaMemcpy(got.data(), l < spec.num_layers ? view.k : view.v, bytes,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      expect_bitwise(got, want, "copy_blocks dtype=" + std::to_string(int(dtype)) + " layer " +
                                    std::to_string(l));
    }
  }
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaKvCache, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
