// CUDA copy_blocks (CopyBlocksParams, gpu/ops.hpp): grid (pair, layer, K|V),
// each CTA copies one whole block with 16-byte words. A block's byte size,
// Hk * block_size * D * elem with block_size in {8, 16, 32}, is a multiple of
// 16, and blocks start at multiples of it from a 256-byte aligned base.
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"

namespace pagoda::gpu::cuda {

namespace {

__global__ void copy_blocks_kernel(void* const* k_layers, void* const* v_layers,
                                   const int32_t* pairs /*[P, 2]*/, int64_t block_words) {
  const int64_t pair = blockIdx.x;
  void* const* layers = blockIdx.z == 0 ? k_layers : v_layers;
  uint4* base = static_cast<uint4*>(layers[blockIdx.y]);
  const int64_t src = pairs[2 * pair], dst = pairs[2 * pair + 1];
  const uint4* from = base + src * block_words;
  uint4* to = base + dst * block_words;
  for (int64_t w = threadIdx.x; w < block_words; w += blockDim.x) to[w] = from[w];
}

}  // namespace

Result<void> launch_copy_blocks(const CopyBlocksParams& p, cudaStream_t stream) {
  if (p.num_pairs <= 0 || p.num_layers <= 0) return {};
  const int64_t block_bytes = p.layout.block_stride() * kv_dtype_bytes(p.dtype);
  if (block_bytes % 16 != 0) {
    return make_error("cuda copy_blocks: block of " + std::to_string(block_bytes) +
                      " bytes is not a multiple of 16");
  }
  if (p.num_layers > 65535) return make_error("cuda copy_blocks: too many layers");
  const dim3 grid(unsigned(p.num_pairs), unsigned(p.num_layers), 2);
  copy_blocks_kernel<<<grid, 256, 0, stream>>>(p.k_layers, p.v_layers, p.block_pairs,
                                               block_bytes / 16);
  return check_launch("copy_blocks");
}

}  // namespace pagoda::gpu::cuda
