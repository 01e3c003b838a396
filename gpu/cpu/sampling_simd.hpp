// The vocabulary-wide reductions of CPU sampling (gpu/cpu/sampling.cpp) with
// AVX2 + FMA: the argmax and the Σ exp(x - mx) of the log-softmax, which a
// decode step runs over every row's 49k+ logits, and a masked row's bitmask. Used only when
// cpu_features().avx2; pure functions, any thread.
#pragma once

#include <cstdint>

namespace pagoda::gpu::cpu::detail {

// The lowest index of the largest value of x[0, n), n >= 1, comparing as
// `x[i] > x[best]` does from best = 0 (so NaNs are passed over, and a NaN at
// index 0 is returned).
int32_t argmax_avx2(const float* x, int32_t n);

// Σ_i exp(x[i] - mx) in double, mx = the max of x (finite). Each term is a
// float exp (exp_avx2.hpp: relative error below 3e-7 on [-87, 0]); terms
// below exp(-87) count as 0. So the sum, and
// exp of a log-sum-exp built on it, are within 3e-7 relative of the exact.
double sum_exp_avx2(const float* x, int32_t n, float mx);

// z[32w + i] := -inf where bit i of words[w] is clear, for the whole words
// w < num_words (z holds at least 32 * num_words floats); words of all ones
// are skipped. The same result as the scalar bit loop, without its branch
// per token (a grammar's mask is irregular, so that branch mispredicts).
void mask_words_avx2(float* z, const uint32_t* words, int32_t num_words);

}  // namespace pagoda::gpu::cpu::detail
