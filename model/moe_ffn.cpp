#include "model/moe_ffn.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace pagoda::model {

void route_topk(const float* logits, int32_t T, int32_t E, int32_t k, bool norm_topk,
                MoeRouting& r) {
  r.offsets.assign(size_t(E) + 1, 0);
  r.chosen.resize(size_t(T) * size_t(k));
  r.tokens.resize(size_t(T) * size_t(k));
  r.weights.resize(size_t(T) * size_t(k));
  r.probs.resize(size_t(E));
  r.chosen_w.resize(size_t(T) * size_t(k));
  std::vector<float>& tmp_w = r.chosen_w;
  // Pass 1: each token's softmax, its top k and their weights (chosen,
  // chosen_w); pass 2 moves them to their experts' groups.
  for (int32_t t = 0; t < T; ++t) {
    const float* l = logits + int64_t(t) * E;  // [E]
    const float mx = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (int32_t e = 0; e < E; ++e) sum += (r.probs[size_t(e)] = std::exp(l[e] - mx));
    for (int32_t e = 0; e < E; ++e) r.probs[size_t(e)] /= sum;
    int32_t* ch = &r.chosen[size_t(t) * size_t(k)];  // [k]
    for (int32_t j = 0; j < k; ++j) {                // selection: k is small (2..8)
      int32_t best = -1;
      for (int32_t e = 0; e < E; ++e) {
        if (std::find(ch, ch + j, e) != ch + j) continue;
        if (best < 0 || r.probs[size_t(e)] > r.probs[size_t(best)]) best = e;
      }
      ch[j] = best;
    }
    float top = 0.0f;
    for (int32_t j = 0; j < k; ++j) top += r.probs[size_t(ch[j])];
    for (int32_t j = 0; j < k; ++j) {
      const float p = r.probs[size_t(ch[j])];
      tmp_w[size_t(t) * size_t(k) + size_t(j)] = norm_topk ? p / top : p;
      ++r.offsets[size_t(ch[j]) + 1];
    }
  }
  for (int32_t e = 0; e < E; ++e) r.offsets[size_t(e) + 1] += r.offsets[size_t(e)];
  // Pass 2: a counting sort by expert, tokens ascending within each.
  std::vector<int32_t>& fill = r.fill;
  fill.assign(r.offsets.begin(), r.offsets.end() - 1);
  for (int32_t t = 0; t < T; ++t) {
    for (int32_t j = 0; j < k; ++j) {
      const size_t i = size_t(t) * size_t(k) + size_t(j);
      const int32_t at = fill[size_t(r.chosen[i])]++;
      r.tokens[size_t(at)] = t;
      r.weights[size_t(at)] = tmp_w[i];
    }
  }
}

uint64_t linear_weight_bytes(const DeviceLinear& w) {
  if (w.storage.size() > 0) return w.storage.size();
  return uint64_t(w.weight.n) * uint64_t(w.weight.row_bytes());
}

Result<MoeFfn> MoeFfn::create(gpu::Backend& backend, const ModelConfig& c, int32_t max_tokens) {
  if (!backend.host_accessible()) {
    return make_error("mixture of experts: the " + std::string(backend.name()) +
                      " backend is not host-accessible (MoE runs on the CPU backend only)");
  }
  MoeFfn m;
  m.hidden_ = c.hidden_size;
  m.num_experts_ = c.num_experts;
  m.used_ = c.num_experts_used;
  m.inter_ = c.expert_intermediate_size;
  m.norm_topk_ = c.moe_norm_topk_prob;
  m.max_tokens_ = max_tokens;
  const size_t T = size_t(max_tokens);
  const std::pair<gpu::DeviceBuffer*, size_t> bufs[] = {{&m.logits_, T * size_t(c.num_experts)},
                                                        {&m.gathered_, T * size_t(c.hidden_size)},
                                                        {&m.gate_up_, T * 2 * size_t(m.inter_)},
                                                        {&m.act_, T * size_t(m.inter_)},
                                                        {&m.out_, T * size_t(c.hidden_size)}};
  for (const auto& [buf, floats] : bufs) {
    auto b = backend.allocate(floats * sizeof(float));
    if (!b) return make_error("mixture of experts scratch: " + b.error().message);
    *buf = std::move(b).value();
  }
  const size_t pairs = T * size_t(m.used_);
  m.routing_.tokens.reserve(pairs);
  m.routing_.weights.reserve(pairs);
  m.routing_.chosen.reserve(pairs);
  m.routing_.chosen_w.reserve(pairs);
  m.routing_.offsets.reserve(size_t(c.num_experts) + 1);
  m.routing_.fill.reserve(size_t(c.num_experts) + 1);
  m.routing_.probs.reserve(size_t(c.num_experts));
  return m;
}

// Expert e over its rows: gather x, gate|up, silu * up into down, scatter-add.
Result<void> MoeFfn::run_expert(gpu::Backend& backend, const MoeExpertWeights& ex, int32_t e,
                                const float* x, float* y) {
  const int32_t begin = routing_.offsets[size_t(e)], n = routing_.offsets[size_t(e) + 1] - begin;
  const int64_t H = hidden_;
  float* xg = gathered_.as<float>();  // [n, H]
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(xg + i * H, x + int64_t(routing_.tokens[size_t(begin + i)]) * H,
                size_t(H) * sizeof(float));
  }
  float* gu = gate_up_.as<float>();  // [n, 2 Ie]
  float* act = act_.as<float>();     // [n, Ie]
  float* yo = out_.as<float>();      // [n, H]
  gpu::MatmulParams up{xg, H, ex.gate_up.weight, ex.gate_up.bias_ptr(), gu, n};
  if (auto ok = backend.matmul(up); !ok) return ok;
  gpu::MatmulParams down{act, inter_, ex.down.weight, ex.down.bias_ptr(), yo, n};
  if (auto ok = backend.silu_mul_matmul({gu, act, n, inter_}, down); !ok) return ok;
  for (int32_t i = 0; i < n; ++i) {
    const float w = routing_.weights[size_t(begin + i)];
    float* dst = y + int64_t(routing_.tokens[size_t(begin + i)]) * H;  // [H]
    const float* src = yo + i * H;                                     // [H]
    for (int64_t h = 0; h < H; ++h) dst[h] += w * src[h];
  }
  bytes_read_ += linear_weight_bytes(ex.gate_up) + linear_weight_bytes(ex.down);
  pairs_run_ += n;
  return {};
}

Result<void> MoeFfn::forward(gpu::Backend& backend, const LlamaLayerWeights& w, const float* x,
                             float* y, int32_t T) {
  if (T > max_tokens_ || int32_t(w.experts.size()) != num_experts_) {
    return make_error(
        "mixture of experts: more tokens than the scratch holds, or a layer without experts");
  }
  if (T == 0) return {};
  float* logits = logits_.as<float>();  // [T, E]
  if (auto ok = backend.matmul({x, hidden_, w.router.weight, w.router.bias_ptr(), logits, T});
      !ok) {
    return ok;
  }
  bytes_read_ += linear_weight_bytes(w.router);
  route_topk(logits, T, num_experts_, used_, norm_topk_, routing_);
  std::memset(y, 0, size_t(T) * size_t(hidden_) * sizeof(float));
  for (int32_t e = 0; e < num_experts_; ++e) {
    if (routing_.offsets[size_t(e) + 1] == routing_.offsets[size_t(e)])
      continue;  // not chosen: not read
    if (auto ok = run_expert(backend, w.experts[size_t(e)], e, x, y); !ok) return ok;
  }
  return {};
}

}  // namespace pagoda::model
