// How the tiled prefill kernel (gpu/cuda/prefill_attention.cu) numbers its
// query tiles over a flattened batch, shared with the host so that a CPU
// test (tests/prefill_tiles_test.cpp) checks it: sequence s's tiles of
// `tile_rows` query rows start at CTA tile_start(s) = qsl[s] / tile_rows + s.
// That is strictly increasing in s and leaves ceil(q_len_s / tile_rows) CTAs
// or more per sequence (floor((a + L) / n) - floor(a / n) + 1 >= ceil(L / n)),
// so a grid of prefill_tile_count(T, S) = T / tile_rows + S CTAs covers every
// tile of every sequence exactly once, and CTA b finds its (sequence, tile)
// by a binary search; CTAs past a sequence's last tile have no work.
// Header-only, PAGODA_HD, no STL.
#pragma once

#include <cstdint>

#include "gpu/host_device.hpp"

namespace pagoda::gpu {

PAGODA_HD inline int64_t prefill_tile_count(int64_t num_tokens, int64_t num_seqs,
                                            int32_t tile_rows) {
  return num_tokens / tile_rows + num_seqs;
}

// CTA b's sequence and tile index within it; false when b has no work.
// qsl: [S + 1] query start locations (non-decreasing, qsl[S] <= T).
PAGODA_HD inline bool find_prefill_tile(const int32_t* qsl, int32_t num_seqs, int32_t tile_rows,
                                        int32_t b, int32_t& seq, int32_t& tile) {
  if (num_seqs <= 0) return false;
  int32_t lo = 0, hi = num_seqs;  // tile_start(lo) <= b; hi == S or b < tile_start(hi)
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    if (qsl[mid] / tile_rows + mid <= b) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  seq = lo;
  tile = b - (qsl[lo] / tile_rows + lo);
  return int64_t{tile} * tile_rows < qsl[lo + 1] - qsl[lo];
}

}  // namespace pagoda::gpu
