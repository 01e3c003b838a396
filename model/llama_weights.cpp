#include "model/llama_weights.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include "model/dummy_weights.hpp"
#include "model/weight_loader.hpp"
#include "gpu/cpu/half_matmul.hpp"
#include "gpu/cpu/quant_packed.hpp"

#ifdef PAGODA_HAVE_CUDA
#include "gpu/cuda/cuda_backend.hpp"
#endif

namespace pagoda::model {

using gpu::LinearWeight;
using gpu::WeightFormat;

const char* weight_precision_name(WeightPrecision p) {
  return p == WeightPrecision::kExact ? "exact" : "quantized";
}

using namespace loader;  // the loader's parts (model/weight_loader.hpp)

namespace {

// Q, K, V: one fused weight, or three weights: with qk_norm (and the two
// per-head norms), or when the three tensors differ in block type and the CPU
// runs them quantized (each keeps its own type: a Q4_K_M file's Q6_K attn_v
// beside Q4_K attn_q, which one fused weight would turn into Q8_0).
Result<void> load_attention_in(Loader& ld, const Architecture& arch, const ModelConfig& c,
                               int32_t l, LlamaLayerWeights& w) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  const int64_t q_rows = int64_t(c.num_heads) * D, kv_rows = int64_t(c.num_kv_heads) * D;
  const std::vector<Role> roles = {Role::kQ, Role::kK, Role::kV};
  const std::vector<Role> biases = {Role::kQBias, Role::kKBias, Role::kVBias};
  if (arch.fused_qkv) {  // one [(Hq + 2 Hk) D, H] tensor, already in the fused order
    auto qkv = ld.fused(l, {Role::kQkv}, {q_rows + 2 * kv_rows}, H, {});
    if (!qkv) return qkv.error();
    w.qkv = std::move(qkv).value();
    return {};
  }
  auto apart = ld.keeps_apart(l, roles);
  if (!apart) return apart.error();
  if (!c.qk_norm && !*apart) {
    std::vector<Role> qkv_bias;
    if (c.attention_bias) qkv_bias = biases;
    auto qkv = ld.fused(l, roles, {q_rows, kv_rows, kv_rows}, H, qkv_bias);
    if (!qkv) return qkv.error();
    w.qkv = std::move(qkv).value();
    return {};
  }
  DeviceLinear* outs[] = {&w.q, &w.k, &w.v};
  const int64_t rows[] = {q_rows, kv_rows, kv_rows};
  for (size_t i = 0; i < 3; ++i) {
    auto lin = ld.single(roles[i], l, rows[i], H,
                         c.attention_bias ? std::optional<Role>(biases[i]) : std::nullopt);
    if (!lin) return lin.error();
    *outs[i] = std::move(lin).value();
  }
  if (!c.qk_norm) return {};
  auto qn = ld.norm(Role::kQNorm, l, D);
  if (!qn) return qn.error();
  w.q_norm = std::move(qn).value();
  auto kn = ld.norm(Role::kKNorm, l, D);
  if (!kn) return kn.error();
  w.k_norm = std::move(kn).value();
  return {};
}

Result<LlamaLayerWeights> load_layer(Loader& ld, const Architecture& arch, const ModelConfig& c,
                                     int32_t l) {
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_rows = int64_t(c.num_heads) * D;
  LlamaLayerWeights w;
  auto attn_norm = ld.norm(Role::kAttnNorm, l, H);
  if (!attn_norm) return attn_norm.error();
  w.attn_norm = std::move(attn_norm).value();
  if (auto ok = load_attention_in(ld, arch, c, l, w); !ok) return ok.error();
  // HF Llama/Mistral put a bias on o_proj too when attention_bias is set; Qwen2 does not.
  std::optional<Role> o_bias;
  if (c.attention_bias && arch.o_bias_with_attention_bias) o_bias = Role::kOBias;
  auto o = ld.single(Role::kO, l, H, q_rows, o_bias);
  if (!o) return o.error();
  w.o = std::move(o).value();
  auto ffn_norm = ld.norm(Role::kFfnNorm, l, H);
  if (!ffn_norm) return ffn_norm.error();
  w.ffn_norm = std::move(ffn_norm).value();
  if (arch.post_norms) {
    auto post_attn = ld.norm(Role::kPostAttnNorm, l, H);
    if (!post_attn) return post_attn.error();
    w.post_attn_norm = std::move(post_attn).value();
    auto post_ffn = ld.norm(Role::kPostFfnNorm, l, H);
    if (!post_ffn) return post_ffn.error();
    w.post_ffn_norm = std::move(post_ffn).value();
  }
  if (c.num_experts > 0) {
    if (auto ok = load_moe(ld, c, l, w); !ok) return ok.error();
    return w;
  }
  auto gate_up = arch.fused_gate_up ? ld.fused(l, {Role::kGateUp}, {2 * I}, H, {})
                                    : ld.fused(l, {Role::kGate, Role::kUp}, {I, I}, H, {});
  if (!gate_up) return gate_up.error();
  w.gate_up = std::move(gate_up).value();
  auto down = ld.single(Role::kDown, l, H, I);
  if (!down) return down.error();
  w.down = std::move(down).value();
  return w;
}

// Token embedding (fp32, or the file's quantized rows on the CPU) and lm_head
// (the output tensor, or tied).
Result<void> load_embedding_and_head(Loader& ld, gpu::Backend& backend, LlamaWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t V = c.vocab_size, H = c.hidden_size;
  auto embed = ld.need(Role::kEmbed, 0, {V, H});
  if (!embed) return embed.error();
  const bool quant_rows = backend.kind() == gpu::BackendKind::kCpu &&
                          w.precision == WeightPrecision::kQuantized &&
                          gpu::is_block_quantized(embed->format);
  std::vector<float> table;  // [V, H] fp32, unless quant_rows
  if (quant_rows) {
    w.embedding_rows = LinearWeight{embed->format, V, H, embed->data};
  } else {
    table = to_f32(embed->format, embed->data, V * H);
    auto buf = ld.place_floats(table, embed->name);
    if (!buf) return buf.error();
    w.embedding = std::move(buf).value();
  }
  auto has_output = ld.has(Role::kOutput, 0);
  if (!has_output) return has_output.error();
  const bool tied = c.tie_word_embeddings || !*has_output;
  Result<DeviceLinear> head = make_error("unset");
  if (!tied) {
    head = ld.single(Role::kOutput, 0, V, H);
  } else if (w.precision == WeightPrecision::kQuantized &&
             gpu::is_block_quantized(embed->format)) {
    ld.note_format(*embed);
    head = ld.place(HostLinear{LinearWeight{embed->format, V, H, embed->data}, nullptr, true},
                    embed->name + " (tied lm_head)");
  } else if (backend.host_accessible()) {  // the fp32 table itself, no second copy
    DeviceLinear view;
    view.weight = LinearWeight{WeightFormat::F32, V, H, w.embedding.data()};
    head = std::move(view);
  } else {
    head = ld.place(HostLinear{LinearWeight{WeightFormat::F32, V, H, table.data()}, nullptr, false},
                    embed->name + " (tied lm_head)");
  }
  if (!head) return head.error();
  w.lm_head = std::move(head).value();
  return {};
}

}  // namespace

Result<DeviceLinear> upload_linear_weight(gpu::Backend& backend, const HostLinear& host,
                                          WeightPrecision precision) {
  LinearWeight hw = host.weight;
  // A block format without CPU kernels becomes Q8_0 rows here (freed on
  // return: only the packed or uploaded copy stays).
  std::vector<uint8_t> q8;
  if (cpu_requantizes(backend.kind(), precision == WeightPrecision::kQuantized, hw.format)) {
    append_q8_0(hw, q8);
    hw = LinearWeight{WeightFormat::Q8_0, hw.n, hw.k, q8.data()};
  }
  DeviceLinear out;
  if (host.bias != nullptr) {
    auto bias = upload_bytes(backend, host.bias, size_t(hw.n) * sizeof(float), "bias");
    if (!bias) return bias.error();
    out.bias = std::move(bias).value();
  }
#ifdef PAGODA_HAVE_CUDA
  if (backend.kind() == gpu::BackendKind::kCuda) {
    auto& cuda = static_cast<gpu::cuda::CudaBackend&>(backend);
    auto dw = cuda.prepare_weight(hw, precision == WeightPrecision::kExact ? WeightFormat::F32
                                                                           : WeightFormat::BF16);
    if (!dw) return dw.error();
    out.weight = dw->weight;
    out.storage = std::move(dw->storage);
    return out;
  }
#endif
  // The CPU's quantized matmul reads block formats, and 16-bit weights kept in
  // 16 bits, fastest in its packed layouts (gpu/cpu/quant_packed.hpp, half_matmul.hpp).
  if (backend.kind() == gpu::BackendKind::kCpu && precision == WeightPrecision::kQuantized &&
      hw.layout == gpu::WeightLayout::kRows && gpu::cpu::packed_layout_enabled()) {
    const bool half = (hw.format == WeightFormat::F16 || hw.format == WeightFormat::BF16) &&
                      hw.k % 32 == 0;
    if (half || gpu::cpu::packed_tile_bytes(hw.format) > 0) {
      std::vector<uint8_t> packed;
      auto pw = half ? gpu::cpu::pack_half_weight(hw, packed) : gpu::cpu::pack_weight(hw, packed);
      if (!pw) return pw.error();
      std::vector<uint8_t>().swap(q8);  // packed now: drop the rows before the upload copy
      auto storage = upload_bytes(backend, packed.data(), packed.size(), "weight");
      if (!storage) return storage.error();
      out.storage = std::move(storage).value();
      out.weight = *pw;
      out.weight.data = out.storage.data();
      return out;
    }
  }
  // The CPU matmul takes F32 and the block formats; exact mode takes F32 only.
  const bool convert = hw.format == WeightFormat::F16 || hw.format == WeightFormat::BF16 ||
                       (precision == WeightPrecision::kExact && hw.format != WeightFormat::F32);
  if (!convert && host.may_alias && q8.empty() && backend.host_accessible()) {
    out.weight = hw;
    return out;
  }
  std::vector<float> converted;
  LinearWeight w = hw;
  if (convert) {
    converted = to_f32(hw.format, hw.data, hw.n * hw.k);
    w = LinearWeight{WeightFormat::F32, hw.n, hw.k, converted.data()};
  }
  auto storage = upload_bytes(backend, w.data, size_t(w.n * w.row_bytes()), "weight");
  if (!storage) return storage.error();
  out.storage = std::move(storage).value();
  out.weight = LinearWeight{w.format, w.n, w.k, out.storage.data()};
  return out;
}

Result<LlamaWeights> load_llama_weights(const std::string& model_path, gpu::Backend& backend,
                                        const WeightLoadOptions& options) {
  if (options.load_format == LoadFormat::kDummy) {
    auto config = load_model_config(model_path);
    if (!config) return config.error();
    return make_dummy_llama_weights(*config, backend, options);
  }
  auto file = WeightFile::open(model_path);
  if (!file) return file.error();
  const WeightFile& f = **file;
  LlamaWeights w;
  w.precision = options.precision;
  auto config = f.gguf() != nullptr ? config_from_gguf(*f.gguf()) : load_model_config(model_path);
  if (!config) return config.error();
  w.config = std::move(config).value();
  if (auto ok = validate_config(w.config, f.path()); !ok) return ok.error();
  const ModelConfig& c = w.config;
  const Architecture* arch = find_architecture(c.architecture);
  if (arch == nullptr) return make_error(f.path() + ": unknown architecture " + c.architecture);
  Loader ld(f, backend, w, *arch);
  if (auto ok = load_embedding_and_head(ld, backend, w); !ok) return ok.error();
  for (int32_t l = 0; l < c.num_layers; ++l) {
    auto layer = load_layer(ld, *arch, c, l);
    if (!layer) return layer.error();
    w.layers.push_back(std::move(layer).value());
    f.release_resident();  // per layer, so the load's peak holds one layer of the file, not all
    if (options.progress) options.progress(l + 1, c.num_layers);
  }
  if (w.requantized_tensors > 0) {
    std::fprintf(stderr,
                 "pagoda: %d tensors of type %s requantized to Q8_0 for the CPU kernels "
                 "(fused gate|up groups of mixed block formats, or all the "
                 "packed-only types with PAGODA_CPU_PACKED=0)\n",
                 w.requantized_tensors, ld.requantized_types().c_str());
  }
  auto norm = ld.norm(Role::kFinalNorm, 0, c.hidden_size);
  if (!norm) return norm.error();
  w.final_norm = std::move(norm).value();
  if (c.rope_scaling.type == RopeScalingType::kFreqFactors && f.gguf() != nullptr) {
    const GgufTensorInfo* info = f.gguf()->find_tensor("rope_freqs.weight");
    auto fmt = info ? gpu::weight_format_from_ggml(info->raw_type) : std::nullopt;
    if (!fmt) return make_error(f.path() + ": rope_freqs.weight is missing or of a bad type");
    w.rope_freq_factors = to_f32(*fmt, f.gguf()->tensor_data(*info), c.head_dim / 2);
    for (float x : w.rope_freq_factors) {
      if (!(std::isfinite(x) && x > 0)) {
        return make_error(f.path() + ": rope_freqs.weight holds a value that is not a positive finite number");
      }
    }
  }
  f.release_resident();
  w.source_keepalive = *file;
  return w;
}

}  // namespace pagoda::model
