// The fixture shared by the CUDA GPU tests (tests/cuda_*_gpu_test.cpp): it
// holds a CudaBackend (options: backend_options()) and a CPU backend (skipping, with the reason, when no
// device is usable). Also brings in the backend-agnostic copy/compare helpers
// of tests/backend_test_util.hpp. Only meaningful in CUDA builds
// (PAGODA_HAVE_CUDA).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "gpu/backend.hpp"
#include "gpu/cuda/cuda_backend.hpp"
#include "gpu/device.hpp"
#include "tests/backend_test_util.hpp"

namespace pagoda::gpu::test {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceInfo info = probe_devices();
    if (info.device_count == 0) GTEST_SKIP() << "no CUDA device: " << info.reason;
    auto g = cuda::CudaBackend::create(backend_options());
    ASSERT_TRUE(g.ok()) << g.error().message;
    gpu_ = std::move(g).value();
    auto c = make_backend(BackendKind::kCpu, BackendOptions{0, 4});
    ASSERT_TRUE(c.ok()) << c.error().message;
    cpu_ = std::move(c).value();
  }
  void TearDown() override {
    if (gpu_) {
      auto ok = gpu_->check();
      EXPECT_TRUE(ok.ok()) << "pending CUDA error at the end of the test: "
                           << ok.error().message;
    }
  }

  // The CUDA backend's options: the defaults, except that the tiled prefill
  // kernel is off, so that attention tests check the row kernel at fp32
  // tolerances (cuda_prefill_attention_gpu_test turns it on).
  virtual BackendOptions backend_options() const {
    BackendOptions o;
    o.tiled_prefill = false;
    return o;
  }

  std::unique_ptr<cuda::CudaBackend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

}  // namespace pagoda::gpu::test
