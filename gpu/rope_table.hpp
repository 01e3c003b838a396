// RopeConfig: a model's rotary embedding settings; rope_inv_freq computes the
// per-pair inverse frequencies once (with linear or llama3 scaling folded in);
// RopeTable holds them in the backend's memory for the rope op.
//
// inv_freq[i] = theta^(-2i / rotary_dim), i < rotary_dim / 2 (HF), then
//  - linear:  inv_freq[i] / factor (positions divided by factor);
//  - llama3:  with wavelen = 2 pi / inv_freq[i],
//             lo = original_max_positions / low_freq_factor,
//             hi = original_max_positions / high_freq_factor:
//             wavelen < hi -> unchanged; wavelen > lo -> inv_freq / factor;
//             otherwise s = (original_max_positions / wavelen - low_freq_factor)
//                          / (high_freq_factor - low_freq_factor),
//                       (1 - s) * inv_freq / factor + s * inv_freq.
// Longrope (Phi-3) divides inv_freq[i] by a per-pair factor list; the caller
// (model/llama_model.cpp) applies those to rope_inv_freq's kNone values, and
// attention_factor scales cos/sin.
// Host-only (computed in double, stored as float). Thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device_buffer.hpp"
#include "gpu/ops.hpp"
#include "gpu/result.hpp"

namespace pagoda::gpu {

enum class RopeScaling : int32_t { kNone = 0, kLinear = 1, kLlama3 = 2 };

struct RopeConfig {
  int32_t head_dim = 0;
  int32_t rotary_dim = 0;  // 0 means head_dim
  float theta = 10000.0f;
  RopeStyle style = RopeStyle::kNeox;
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;                   // linear and llama3
  float low_freq_factor = 1.0f;          // llama3
  float high_freq_factor = 4.0f;         // llama3
  int32_t original_max_positions = 8192;  // llama3
  // Multiplies cos/sin (RopeParams::scale): longrope's attention factor; 1 otherwise.
  float attention_factor = 1.0f;

  int32_t effective_rotary_dim() const { return rotary_dim == 0 ? head_dim : rotary_dim; }
};

inline Result<void> validate_rope_config(const RopeConfig& c) {
  int32_t rot = c.effective_rotary_dim();
  if (c.head_dim <= 0 || rot <= 0 || rot > c.head_dim || rot % 2 != 0) {
    return make_error("rope: bad dims head_dim=" + std::to_string(c.head_dim) +
                      " rotary_dim=" + std::to_string(rot));
  }
  if (!(c.theta > 1.0f)) return make_error("rope: theta must be > 1");
  if (c.scaling != RopeScaling::kNone && !(c.factor > 0.0f)) {
    return make_error("rope: scaling factor must be > 0");
  }
  if (c.scaling == RopeScaling::kLlama3 &&
      (!(c.high_freq_factor > c.low_freq_factor) || !(c.low_freq_factor > 0.0f) ||
       c.original_max_positions <= 0)) {
    return make_error("rope: llama3 scaling needs 0 < low_freq_factor < high_freq_factor "
                      "and original_max_positions > 0");
  }
  return {};
}

// Requires validate_rope_config(c).ok(). Returns rotary_dim / 2 values.
inline std::vector<float> rope_inv_freq(const RopeConfig& c) {
  const int32_t rot = c.effective_rotary_dim();
  std::vector<float> out(size_t(rot / 2));
  const double pi = 3.14159265358979323846;
  for (int32_t i = 0; i < rot / 2; ++i) {
    double f = std::pow(double(c.theta), -2.0 * i / rot);
    if (c.scaling == RopeScaling::kLinear) {
      f /= c.factor;
    } else if (c.scaling == RopeScaling::kLlama3) {
      double wavelen = 2.0 * pi / f;
      double lo_wavelen = c.original_max_positions / double(c.low_freq_factor);
      double hi_wavelen = c.original_max_positions / double(c.high_freq_factor);
      if (wavelen > lo_wavelen) {
        f /= c.factor;
      } else if (wavelen >= hi_wavelen) {
        double s = (c.original_max_positions / wavelen - c.low_freq_factor) /
                   (double(c.high_freq_factor) - c.low_freq_factor);
        f = (1.0 - s) * f / c.factor + s * f;
      }
    }
    out[size_t(i)] = float(f);
  }
  return out;
}

// The inverse frequencies of one RopeConfig in the backend's memory. Made by
// Backend::create_rope_table; must not outlive its Backend.
class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(RopeConfig config, DeviceBuffer inv_freq)
      : config_(config), inv_freq_(std::move(inv_freq)) {}

  const RopeConfig& config() const { return config_; }
  const float* inv_freq() const { return inv_freq_.as<const float>(); }

  // Parameters for Backend::rope over q [T, Hq, D] and k [T, Hk, D] (k may be
  // nullptr); strides are elements between token rows.
  RopeParams params(float* q, int64_t q_stride, float* k, int64_t k_stride,
                    const int32_t* positions, int32_t num_tokens, int32_t num_q_heads,
                    int32_t num_kv_heads) const {
    RopeParams p;
    p.q = q;
    p.k = k;
    p.positions = positions;
    p.inv_freq = inv_freq();
    p.q_stride = q_stride;
    p.k_stride = k_stride;
    p.num_tokens = num_tokens;
    p.num_q_heads = num_q_heads;
    p.num_kv_heads = num_kv_heads;
    p.head_dim = config_.head_dim;
    p.rotary_dim = config_.effective_rotary_dim();
    p.style = config_.style;
    p.scale = config_.attention_factor;
    return p;
  }

 private:
  RopeConfig config_;
  DeviceBuffer inv_freq_;
};

}  // namespace pagoda::gpu
