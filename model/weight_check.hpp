// Finite-value checks of weight data as stored in a model file: NaN or Inf
// anywhere in a weight makes every output NaN (or garbage), so the loader
// rejects such files with the tensor's name instead of serving them.
//
// Contract: first_non_finite(format, data, numel) scans numel elements of
// `data` (storage_bytes(format, numel) bytes, numel a whole number of
// blocks) and returns the index of the first element whose value is NaN or
// +-Inf, or -1 when every value is finite. For the block formats the fp16
// scale fields of each block (their offsets are in the type table,
// gpu/weight_format.hpp) are checked: the integer quants and sub-block
// scales are finite by construction; the index returned is the block's
// first element. No alignment is required of `data`.
// Pure, reentrant.
#pragma once

#include <cstdint>

#include "gpu/weight_format.hpp"

namespace pagoda::model {

int64_t first_non_finite(gpu::WeightFormat format, const uint8_t* data, int64_t numel);

}  // namespace pagoda::model
