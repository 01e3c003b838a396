#include "gpu/device.hpp"

#ifdef PAGODA_HAVE_CUDA
#include "gpu/cuda/cuda_probe.hpp"
#endif

namespace pagoda::gpu {

DeviceInfo probe_devices() {
  DeviceInfo info;
#ifdef PAGODA_HAVE_CUDA
  info.cuda_compiled = true;
  cuda::ProbeResult probe = cuda::probe();
  info.device_count = probe.device_count;
  info.name = probe.name;
  info.reason = probe.error;
#else
  info.reason = "built without CUDA (PAGODA_CUDA=OFF)";
#endif
  return info;
}

}  // namespace pagoda::gpu
