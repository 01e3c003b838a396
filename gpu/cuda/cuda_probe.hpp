// CUDA runtime probe, compiled only with PAGODA_CUDA. Host-callable, any thread.
#pragma once

#include <string>

namespace pagoda::gpu::cuda {

struct ProbeResult {
  int device_count = 0;
  std::string name;   // device 0
  std::string error;  // the CUDA error text when device_count == 0
};

ProbeResult probe();

}  // namespace pagoda::gpu::cuda
