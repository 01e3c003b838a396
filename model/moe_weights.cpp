// The MoE layers' weights (see model/llama_weights.hpp, model/moe_ffn.hpp).
#include "model/weight_loader.hpp"

namespace pagoda::model::loader {

// MoE: the router [E, H] and per expert e gate|up [2 Ie, H] (gate rows
// first, as the dense gate_up) and down [H, Ie].
Result<void> load_moe(Loader& ld, const ModelConfig& c, int32_t l, LlamaLayerWeights& w) {
  const int64_t H = c.hidden_size, E = c.num_experts, Ie = c.expert_intermediate_size;
  auto router = ld.single(Role::kRouter, l, E, H);
  if (!router) return router.error();
  w.router = std::move(router).value();
  auto gates = ld.expert_parts(Role::kExpGate, l, E, Ie, H);
  if (!gates) return gates.error();
  auto ups = ld.expert_parts(Role::kExpUp, l, E, Ie, H);
  if (!ups) return ups.error();
  auto downs = ld.expert_parts(Role::kExpDown, l, E, H, Ie);
  if (!downs) return downs.error();
  for (int64_t e = 0; e < E; ++e) {
    MoeExpertWeights x;
    auto gate_up =
        ld.stack({(*gates)[size_t(e)], (*ups)[size_t(e)]}, H, {}, (*gates)[size_t(e)].name);
    if (!gate_up) return gate_up.error();
    x.gate_up = std::move(gate_up).value();
    auto down = ld.single_ref((*downs)[size_t(e)]);
    if (!down) return down.error();
    x.down = std::move(down).value();
    w.experts.push_back(std::move(x));
  }
  return {};
}

}  // namespace pagoda::model::loader
