// Backend::allocate_pinned / upload_async on the CPU backend (the default
// implementation: aligned host memory and a plain copy), including the range
// checks. The CUDA overrides are checked in cuda_async_upload_gpu_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "gpu/backend.hpp"

namespace pagoda::gpu {
namespace {

TEST(PinnedUpload, CpuBackendCopiesAndChecksRanges) {
  auto b = make_backend(BackendKind::kCpu);
  ASSERT_TRUE(b.ok());
  auto pinned = (*b)->allocate_pinned(1000);
  ASSERT_TRUE(pinned.ok()) << pinned.error().message;
  EXPECT_EQ(pinned->size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pinned->data()) % 256, 0u);
  EXPECT_TRUE(pinned->contains(pinned->as<char>() + 10, 990));
  EXPECT_FALSE(pinned->contains(pinned->as<char>() + 10, 991));
  std::iota(pinned->as<uint8_t>(), pinned->as<uint8_t>() + 1000, uint8_t(0));
  auto dst = (*b)->allocate(1024);
  ASSERT_TRUE(dst.ok());
  std::memset(dst->data(), 0xAB, 1024);
  ASSERT_TRUE((*b)->upload_async(*dst, 24, pinned->data(), 1000).ok());
  (*b)->synchronize();
  std::vector<uint8_t> back(1024);
  ASSERT_TRUE((*b)->download(*dst, 0, back.data(), 1024).ok());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(back[size_t(i)], 0xAB);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(back[size_t(24 + i)], uint8_t(i)) << i;
  EXPECT_FALSE((*b)->upload_async(*dst, 25, pinned->data(), 1000).ok());  // past the end
  auto empty = (*b)->allocate_pinned(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
  PinnedBuffer moved = std::move(*pinned);
  EXPECT_EQ(moved.size(), 1000u);
  EXPECT_EQ(pinned->data(), nullptr);
}

}  // namespace
}  // namespace pagoda::gpu
