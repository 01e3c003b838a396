// CPU twin of copy_blocks (CopyBlocksParams): block dst := block src in every
// layer's K and V. Work items are (layer, pair); destinations are distinct and
// never sources, so the items are independent.
#include <cassert>
#include <cstring>

#include "gpu/cpu/cpu_ops.hpp"

namespace pagoda::gpu::cpu {

void copy_blocks(const CopyBlocksParams& p, ThreadPool& pool) {
  const int64_t block_bytes = p.layout.block_stride() * kv_dtype_bytes(p.dtype);
  const size_t items = size_t(p.num_layers) * size_t(p.num_pairs);
  pool.parallel_for(items, [&](size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) {
      const size_t layer = item / size_t(p.num_pairs);
      const size_t pair = item % size_t(p.num_pairs);
      const int64_t src = p.block_pairs[2 * pair];
      const int64_t dst = p.block_pairs[2 * pair + 1];
      assert(src >= 0 && src < p.layout.num_blocks && dst >= 0 && dst < p.layout.num_blocks);
      for (void* const* layers : {p.k_layers, p.v_layers}) {
        char* base = static_cast<char*>(layers[layer]);
        std::memcpy(base + dst * block_bytes, base + src * block_bytes, size_t(block_bytes));
      }
    }
  }, 4);
}

}  // namespace pagoda::gpu::cpu
