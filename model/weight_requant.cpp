#include "model/weight_requant.hpp"

#include "gpu/cpu/quant_packed.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::model {

using gpu::WeightFormat;

bool cpu_runs_format_in_rows(WeightFormat f) {
  return f == WeightFormat::F32 || f == WeightFormat::F16 || f == WeightFormat::BF16 ||
         f == WeightFormat::Q8_0 || f == WeightFormat::Q4_0 || f == WeightFormat::Q4_1;
}

bool cpu_runs_format(WeightFormat f) {
  const bool packed_kernel = gpu::cpu::packed_tile_bytes(f) > 0 && gpu::cpu::packed_layout_enabled();
  return cpu_runs_format_in_rows(f) || packed_kernel;
}

bool cpu_requantizes(gpu::BackendKind backend, bool quantized, WeightFormat f) {
  return backend == gpu::BackendKind::kCpu && quantized && gpu::is_block_quantized(f) &&
         !cpu_runs_format(f);
}

void append_q8_0(const gpu::LinearWeight& w, std::vector<uint8_t>& out) {
  const int64_t row_q8 = gpu::storage_bytes(WeightFormat::Q8_0, w.k);
  const size_t at = out.size();
  out.resize(at + size_t(w.n * row_q8));
  std::vector<float> row(size_t(w.k));  // [k]
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.n; ++r) {
    gpu::dequantize_row(w.format, src + r * w.row_bytes(), row.data(), w.k);
    gpu::quantize_q8_0(row.data(), out.data() + at + r * row_q8, w.k);
  }
}

}  // namespace pagoda::model
