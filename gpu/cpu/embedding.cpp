// CPU twin of the embedding gather (see EmbeddingParams in gpu/ops.hpp).
#include <algorithm>
#include <cstring>

#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::cpu {

void embedding(const EmbeddingParams& p, ThreadPool& pool) {
  const size_t hidden = size_t(p.hidden);
  const auto* quant = static_cast<const uint8_t*>(p.quant_table);
  const size_t row_bytes = quant ? size_t(storage_bytes(p.table_format, p.hidden)) : 0;
  const size_t min_rows = std::max<size_t>(1, 16384 / std::max<size_t>(hidden, 1));
  pool.parallel_for(size_t(std::max(p.num_tokens, 0)), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      float* dst = p.out + t * hidden;
      const int64_t id = p.ids[t];
      if (id < 0 || id >= p.num_rows) {
        std::fill(dst, dst + hidden, 0.0f);
      } else if (p.table == nullptr) {
        dequantize_row(p.table_format, quant + size_t(id) * row_bytes, dst, p.hidden);
      } else {
        std::memcpy(dst, p.table + size_t(id) * hidden, hidden * sizeof(float));
      }
    }
  }, min_rows);
}

}  // namespace pagoda::gpu::cpu
