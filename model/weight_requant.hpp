// weight_requant: the load-time conversion to Q8_0 (which the int8 CPU
// matmul runs in either layout) of block formats the CPU kernels cannot run
// as loaded: Q5_0, Q5_1, IQ4_NL, IQ4_XS and the K-quants Q2_K..Q6_K when
// PAGODA_CPU_PACKED=0 (their kernels read the packed layout only), and a
// fused stack of mixed block formats where one lacks row-layout kernels. Used by the model loader
// (model/llama_weights.cpp) for the CPU backend in quantized precision; the
// CUDA backend and exact precision dequantize instead (no requantization).
//
// Q8_0 keeps the int8 kernels' speed and about a quarter of fp32's memory;
// the cost is one more rounding, at most half a Q8_0 step (max|x|/254 of
// each 32-element block), on top of the file's own quantization.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/weight_format.hpp"

namespace pagoda::model {

// Whether the CPU matmul runs format f as stored: F32, the 16-bit formats
// (packed), the block formats with int8 kernels in both layouts
// (Q8_0/Q4_0/Q4_1) and, when the loader packs (packed_layout_enabled), those
// with packed kernels only (Q5_0/Q5_1/IQ4_NL/IQ4_XS/Q2_K..Q6_K).
bool cpu_runs_format(gpu::WeightFormat f);

// The formats of cpu_runs_format whose kernels also read the file's row
// layout (F32, F16, BF16, Q8_0, Q4_0, Q4_1): a mixed-format stack of rows
// (llama_weights.cpp's stack_rows) keeps its old rule by this one.
bool cpu_runs_format_in_rows(gpu::WeightFormat f);

// Whether a weight of format f is converted to Q8_0 at load: the CPU backend
// in quantized precision, for a block format the CPU kernels lack.
bool cpu_requantizes(gpu::BackendKind backend, bool quantized, gpu::WeightFormat f);

// Appends W[n, k] (any format; k % 32 == 0; w.data in host memory, kRows
// layout) to `out` as n rows of k/32 Q8_0 blocks. One row of fp32 scratch
// at a time, never the whole tensor.
void append_q8_0(const gpu::LinearWeight& w, std::vector<uint8_t>& out);

}  // namespace pagoda::model
