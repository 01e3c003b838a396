// Device discovery: which backend the process can use. Safe to call from any
// thread; never throws. Without a CUDA build, or without a driver/device, it
// reports zero devices and a reason, and callers fall back to the CPU backend.
#pragma once

#include <string>

namespace pagoda::gpu {

struct DeviceInfo {
  bool cuda_compiled = false;  // built with PAGODA_CUDA
  int device_count = 0;        // usable CUDA devices (0 when none)
  std::string name;            // device 0's name when device_count > 0
  std::string reason;          // why device_count is 0 (printed by GPU tests that skip)
};

DeviceInfo probe_devices();

}  // namespace pagoda::gpu
