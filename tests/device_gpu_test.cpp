// GPU smoke test: the CUDA build finds a device. Skips (with the reason) where
// there is none, so CPU-only CI stays green.
#include <gtest/gtest.h>

#include "gpu/device.hpp"

TEST(Device, ProbeReportsDeviceOrReason) {
  pagoda::gpu::DeviceInfo info = pagoda::gpu::probe_devices();
  if (info.device_count == 0) {
    EXPECT_FALSE(info.reason.empty());
    GTEST_SKIP() << "no CUDA device: " << info.reason;
  }
  EXPECT_FALSE(info.name.empty());
}
