// CudaBackend::prepare_weight: converts a host LinearWeight (any format of
// gpu/weight_format.hpp) to BF16 or F32 on the host, chunk by chunk of rows
// (about 4M elements at a time), and uploads it. Dequantisation is
// gpu::dequantize_row (exact fp32); BF16 rounds to nearest even.
#include <algorithm>
#include <vector>

#include "gpu/cuda/cuda_backend.hpp"
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::cuda {

Result<DeviceWeight> CudaBackend::prepare_weight(const LinearWeight& host, WeightFormat target) {
  if (target != WeightFormat::BF16 && target != WeightFormat::F32) {
    return make_error("cuda prepare_weight: target must be BF16 or F32, not " +
                      std::string(format_name(target)));
  }
  auto view = make_linear_weight(host.format, host.n, host.k, host.data);
  if (!view) return make_error("cuda prepare_weight: " + view.error().message);
  const int64_t elem_bytes = target == WeightFormat::BF16 ? 2 : 4;
  auto buf = allocate(size_t(host.n * host.k * elem_bytes));
  if (!buf) return make_error("cuda prepare_weight: " + buf.error().message);
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 22) / host.k);
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  for (int64_t r0 = 0; r0 < host.n; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, host.n - r0);
    const int64_t elems = rows * host.k;
    const char* src = static_cast<const char*>(host.data) + r0 * host.row_bytes();
    const void* bytes = src;  // the format already matches: upload as is
    if (host.format != target) {
      f32.resize(size_t(elems));
      dequantize_row(host.format, src, f32.data(), elems);
      bytes = f32.data();
      if (target == WeightFormat::BF16) {
        b16.resize(size_t(elems));
        std::transform(f32.begin(), f32.end(), b16.begin(), fp32_to_bf16);
        bytes = b16.data();
      }
    }
    PAGODA_CUDA_TRY(upload(*buf, size_t(r0 * host.k * elem_bytes), bytes,
                           size_t(elems * elem_bytes)));
  }
  LinearWeight device{target, host.n, host.k, buf->data()};
  return DeviceWeight{device, std::move(buf).value()};
}

}  // namespace pagoda::gpu::cuda
