#include <cuda_runtime.h>

#include "gpu/cuda/cuda_probe.hpp"

namespace pagoda::gpu::cuda {

ProbeResult probe() {
  ProbeResult r;
  int count = 0;  // cudaGetDeviceCount leaves it unwritten without a driver
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    r.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error for later probes
    return r;
  }
  if (count == 0) {
    r.error = "no CUDA device present";
    return r;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) r.name = prop.name;
  r.device_count = count;
  return r;
}

}  // namespace pagoda::gpu::cuda
