// CudaBackend::allocate_pinned (page-locked) and upload_async (queued on the
// stream, no wait): several uploads from one pinned buffer queued before a
// kernel that reads them and a download arrive in order; range errors are
// reported without copying. Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <cuda_runtime.h>

#include <numeric>
#include <vector>

#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaAsyncUpload = CudaTest;

TEST_F(CudaAsyncUpload, QueuedUploadsArriveInOrder) {
  auto pinned = gpu_->allocate_pinned(4096);
  ASSERT_TRUE(pinned.ok()) << pinned.error().message;
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, pinned->data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);  // page-locked, not pageable
  auto dst = gpu_->allocate(4096);
  ASSERT_TRUE(dst.ok());
  int32_t* host = pinned->as<int32_t>();
  std::iota(host, host + 512, 0);
  std::iota(host + 512, host + 1024, 10000);
  ASSERT_TRUE(gpu_->upload_async(*dst, 0, host, 2048).ok());
  ASSERT_TRUE(gpu_->upload_async(*dst, 2048, host + 512, 2048).ok());
  // A second write to the same bytes, queued after the first: the later one wins.
  ASSERT_TRUE(gpu_->upload_async(*dst, 0, host + 512, 16).ok());
  std::vector<int32_t> back(1024);
  ASSERT_TRUE(gpu_->download(*dst, 0, back.data(), 4096).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[size_t(i)], 10000 + i);
  for (int i = 4; i < 512; ++i) EXPECT_EQ(back[size_t(i)], i);
  for (int i = 512; i < 1024; ++i) EXPECT_EQ(back[size_t(i)], 10000 + i - 512);
  EXPECT_FALSE(gpu_->upload_async(*dst, 4000, host, 200).ok());
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaAsyncUpload, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
