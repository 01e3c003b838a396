// bench_gemv.hpp: decode GEMV bandwidth at Llama-3-8B shapes (CUDA only).
#include "bench_gemv.hpp"

#if PAGODA_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <utility>

#include "gpu/cuda/cuda_backend.hpp"
#include "gpu/cuda/cuda_ops.cuh"

namespace pagoda::tools {

using gpu::DeviceBuffer;
using gpu::LinearWeight;
using gpu::MatmulParams;
using gpu::WeightFormat;
using gpu::cuda::CudaBackend;

namespace {

// Mean seconds per call of fn over iters calls after 3 warm-up calls.
double time_on_stream(CudaBackend& be, int iters, const std::function<void(int)>& fn) {
  for (int i = 0; i < 3; ++i) fn(i);
  be.synchronize();
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return 0;
  cudaEventRecord(start, be.stream());
  for (int i = 0; i < iters; ++i) fn(i);
  cudaEventRecord(stop, be.stream());
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / iters;
}

struct Shape {
  const char* name;
  int64_t n, k;
};

}  // namespace

double measure_copy_bandwidth(CudaBackend& be, int iters) {
  const size_t bytes = size_t{512} << 20;
  auto a = be.allocate(bytes), b = be.allocate(bytes);
  if (!a || !b) return 0;
  if (cudaMemsetAsync(a->data(), 1, bytes, be.stream()) != cudaSuccess) return 0;
  const double sec = time_on_stream(be, iters, [&](int) {
    cudaMemcpyAsync(b->data(), a->data(), bytes, cudaMemcpyDeviceToDevice, be.stream());
  });
  if (!be.check() || sec <= 0) return 0;
  return 2.0 * double(bytes) / sec;
}

namespace {

// One (shape, M, x type) case: mean time over `iters` calls, each on the next
// weight copy; appends its JSON line. x_bf16: the engine's decode path (the
// producer kernels write x in bf16; launch_gemv reads it as it is), else
// CudaBackend::matmul on fp32 x (GEMV rounding x on load for M <= 8, cuBLAS
// after a conversion kernel above).
Result<void> gemv_case(CudaBackend& be, const Shape& s, const std::vector<DeviceBuffer>& ws,
                       int64_t M, bool x_bf16, double copy_bps, double peak_bps, int iters,
                       std::vector<std::string>& out) {
  const int64_t wbytes = s.n * s.k * 2, xel = x_bf16 ? 2 : 4;
  std::vector<uint16_t> xh(size_t(M * s.k), 0x3E80);  // bf16 0.25
  std::vector<float> xf(size_t(M * s.k), 0.25f);
  auto xb = be.allocate(size_t(M * s.k * xel)), yb = be.allocate(size_t(M * s.n) * 4);
  if (!xb) return xb.error();
  if (!yb) return yb.error();
  const void* host = x_bf16 ? static_cast<const void*>(xh.data()) : static_cast<const void*>(xf.data());
  if (auto up = be.upload(*xb, 0, host, size_t(M * s.k * xel)); !up) return up;
  const int copies = int(ws.size());
  Result<void> failed;
  const double sec = time_on_stream(be, iters, [&](int i) {
    const LinearWeight w{WeightFormat::BF16, s.n, s.k, ws[size_t(i % copies)].data()};
    const MatmulParams p{xb->as<const float>(), s.k, w, nullptr, yb->as<float>(), M};
    auto ok = x_bf16 ? gpu::cuda::launch_gemv(p, xb->data(), s.k, true, be.stream()) : be.matmul(p);
    if (!ok && failed) failed = ok;
  });
  if (!failed) return failed;
  if (auto ok = be.check(); !ok) return ok;
  const double bytes = double(wbytes) + double(M * s.k * xel) + double(M * s.n * 4);
  const double bps = sec > 0 ? bytes / sec : 0;
  char line[420];
  std::snprintf(line, sizeof line,
                "{\"name\":\"%s\",\"N\":%lld,\"K\":%lld,\"M\":%lld,\"path\":\"%s\","
                "\"x\":\"%s\",\"weight_copies\":%d,\"us\":%.2f,\"gb_per_s\":%.1f,"
                "\"fraction_of_copy\":%.3f,\"fraction_of_peak\":%.3f}",
                s.name, (long long)s.n, (long long)s.k, (long long)M, M <= 8 ? "gemv" : "cublas",
                x_bf16 ? "bf16" : "f32", copies, sec * 1e6, bps / 1e9,
                copy_bps > 0 ? bps / copy_bps : 0.0, peak_bps > 0 ? bps / peak_bps : 0.0);
  std::fprintf(stderr, "%s\n", line);
  out.emplace_back(line);
  return {};
}

}  // namespace

Result<void> gemv_cases(CudaBackend& be, double copy_bps, double peak_bps, int iters,
                             std::vector<std::string>& out) {
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const Shape shapes[] = {{"q_o", 4096, 4096}, {"gate_up", 14336, 4096},
                          {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  for (const Shape& s : shapes) {
    const int64_t wbytes = s.n * s.k * 2;
    const int copies = int(std::clamp<int64_t>((4 * int64_t{std::max(l2, 1)} + wbytes - 1) / wbytes, 1, 64));
    std::vector<DeviceBuffer> ws;
    for (int c = 0; c < copies; ++c) {
      auto w = be.allocate(size_t(wbytes));
      if (!w) return w.error();
      cudaMemsetAsync(w->data(), 0x3C, size_t(wbytes), be.stream());  // bf16 0x3C3C = 0.0115
      ws.push_back(std::move(w).value());
    }
    for (int64_t M : {1, 2, 4, 8, 16}) {
      if (auto ok = gemv_case(be, s, ws, M, false, copy_bps, peak_bps, iters, out); !ok) return ok;
    }
    for (int64_t M : {1, 2, 4, 8}) {
      if (auto ok = gemv_case(be, s, ws, M, true, copy_bps, peak_bps, iters, out); !ok) return ok;
    }
  }
  return {};
}

}  // namespace pagoda::tools

#endif
