// ModelConfig from GGUF metadata and HF config.json, model_inspect's JSON, and
// the real SmolLM2 model (whose HF config.json is reproduced below: both
// sources must give the same config, apart from the RoPE pairing).
#include "model/model_config.hpp"

#include <simdjson.h>

#include <filesystem>
#include <functional>
#include <set>

#include "formats_test_util.hpp"
#include "model/model_inspect.hpp"
#include "model/model_text.hpp"

namespace pagoda::model {
namespace {

using test::Bytes;

// A small GGUF model config: keys in `skip` are left out, `extra` adds more.
std::string write_gguf(const std::string& name, const std::string& arch,
                       const std::set<std::string>& skip = {},
                       const std::function<void(test::GgufWriter&)>& extra = {}) {
  test::GgufWriter w;
  const std::string p = arch + ".";
  const auto u32 = [&](const std::string& k, uint32_t v) {
    if (!skip.count(k)) w.kv_u32(k, v);
  };
  if (!skip.count("general.architecture")) w.kv_str("general.architecture", arch);
  u32(p + "block_count", 2);
  u32(p + "context_length", 256);
  u32(p + "embedding_length", 64);
  u32(p + "feed_forward_length", 128);
  u32(p + "attention.head_count", 4);
  u32(p + "attention.head_count_kv", 2);
  u32(p + "rope.dimension_count", 16);
  if (!skip.count("freq_base")) w.kv_f32(p + "rope.freq_base", 1e6f);
  if (!skip.count("eps")) w.kv_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  std::vector<std::string> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back("t" + std::to_string(i));
  if (!skip.count("tokens")) w.kv_str_array("tokenizer.ggml.tokens", tokens);
  u32("tokenizer.ggml.bos_token_id", 1);
  u32("tokenizer.ggml.eos_token_id", 2);
  if (extra) extra(w);
  return test::write_file(name, w.build());
}

Result<ModelConfig> gguf_config(const std::string& path) {
  auto g = GgufFile::open(path);
  if (!g) return g.error();
  return config_from_gguf(*g);
}

std::string gguf_error(const std::string& path) {
  auto c = gguf_config(path);
  EXPECT_FALSE(c.ok()) << path;
  if (c.ok()) return "";
  EXPECT_NE(c.error().message.find(path), std::string::npos) << c.error().message;
  return c.error().message;
}

test::GgufTensorSpec f32_tensor(const std::string& name, std::vector<uint64_t> dims) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return test::spec(name, std::move(dims), 0, std::vector<uint8_t>(4 * n, 0));
}

TEST(ModelConfigGguf, SyntheticLlama) {
  auto c = gguf_config(write_gguf("llama.gguf", "llama"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->intermediate_size, 128);
  EXPECT_EQ(c->vocab_size, 100);  // from the token list
  EXPECT_EQ(c->max_context, 256);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);  // the float32 1e-6f read as the decimal it encodes
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_TRUE(c->rope_interleaved);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{2});
}

// Qwen3 as llama.cpp writes it: qwen3.* keys, attention.key_length = head_dim
// (here 32 != 64 / 4), no rope.dimension_count, NeoX rope, no biases.
TEST(ModelConfigGguf, SyntheticQwen3) {
  auto c = gguf_config(write_gguf("qwen3.gguf", "qwen3", {"qwen3.rope.dimension_count"},
                                  [](test::GgufWriter& w) {
                                    w.kv_u32("qwen3.attention.key_length", 32);
                                    w.kv_u32("qwen3.attention.value_length", 32);
                                  }));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->rope_interleaved);
  auto q2 = gguf_config(write_gguf("qwen2-noqk.gguf", "qwen2"));
  ASSERT_TRUE(q2.ok()) << q2.error().message;
  EXPECT_FALSE(q2->qk_norm);
}

TEST(ModelConfigGguf, SyntheticQwen2) {
  auto c = gguf_config(write_gguf("qwen2.gguf", "qwen2", {"freq_base"}, [](test::GgufWriter& w) {
    w.kv_u32("qwen2.vocab_size", 120).kv_u32("tokenizer.ggml.eot_token_id", 7);
    w.kv_u32("tokenizer.ggml.eom_token_id", 2);  // duplicate of eos: listed once
    w.tensor(f32_tensor("output.weight", {64, 120}));
  }));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_EQ(c->vocab_size, 120);
  EXPECT_EQ(c->rope_theta, 10000.0);  // default
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->rope_interleaved);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 7}));
}

TEST(ModelConfigGguf, RopeScaling) {
  auto c = gguf_config(write_gguf("linear.gguf", "llama", {}, [](test::GgufWriter& w) {
    w.kv_str("llama.rope.scaling.type", "linear").kv_f32("llama.rope.scaling.factor", 4.0f);
    w.tensor(f32_tensor("blk.0.attn_q.bias", {64}));
  }));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 4.0);
  EXPECT_TRUE(c->attention_bias);
  c = gguf_config(write_gguf("freqs.gguf", "llama", {}, [](test::GgufWriter& w) {
    w.tensor(f32_tensor("rope_freqs.weight", {8}));
  }));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kFreqFactors);
  std::string e = gguf_error(write_gguf("freqs_bad.gguf", "llama", {}, [](test::GgufWriter& w) {
    w.tensor(f32_tensor("rope_freqs.weight", {5}));
  }));
  EXPECT_NE(e.find("rope_freqs.weight"), std::string::npos) << e;
  e = gguf_error(write_gguf("yarn.gguf", "llama", {}, [](test::GgufWriter& w) {
    w.kv_str("llama.rope.scaling.type", "yarn");
  }));
  EXPECT_NE(e.find("unsupported rope scaling type 'yarn'"), std::string::npos) << e;
}

TEST(ModelConfigGguf, Errors) {
  std::string e = gguf_error(write_gguf("gpt2.gguf", "gpt2"));
  EXPECT_NE(e.find("unsupported architecture 'gpt2'"), std::string::npos) << e;
  e = gguf_error(write_gguf("noarch.gguf", "llama", {"general.architecture"}));
  EXPECT_NE(e.find("'general.architecture' is missing"), std::string::npos) << e;
  e = gguf_error(write_gguf("noblocks.gguf", "llama", {"llama.block_count"}));
  EXPECT_NE(e.find("'llama.block_count' is missing"), std::string::npos) << e;
  e = gguf_error(write_gguf("noeps.gguf", "llama", {"eps"}));
  EXPECT_NE(e.find("layer_norm_rms_epsilon"), std::string::npos) << e;
  e = gguf_error(write_gguf("novocab.gguf", "llama", {"tokens"}));
  EXPECT_NE(e.find("vocabulary size"), std::string::npos) << e;
  e = gguf_error(write_gguf("strblocks.gguf", "llama", {"llama.block_count"},
                            [](test::GgufWriter& w) { w.kv_str("llama.block_count", "2"); }));
  EXPECT_NE(e.find("'llama.block_count' has type string"), std::string::npos) << e;
  e = gguf_error(write_gguf(
      "heads.gguf", "llama", {"llama.attention.head_count", "llama.rope.dimension_count"},
      [](test::GgufWriter& w) { w.kv_u32("llama.attention.head_count", 6); }));
  EXPECT_NE(e.find("does not divide"), std::string::npos) << e;
  e = gguf_error(
      write_gguf("kvheads.gguf", "llama", {"llama.attention.head_count_kv"},
                 [](test::GgufWriter& w) { w.kv_u32("llama.attention.head_count_kv", 3); }));
  EXPECT_NE(e.find("num_kv_heads 3 does not divide num_heads 4"), std::string::npos) << e;
  e = gguf_error(write_gguf("zero.gguf", "llama", {"llama.block_count"},
                            [](test::GgufWriter& w) { w.kv_u32("llama.block_count", 0); }));
  EXPECT_NE(e.find("num_layers must be positive"), std::string::npos) << e;
  e = gguf_error(
      write_gguf("ropedim.gguf", "llama", {"llama.rope.dimension_count"},
                 [](test::GgufWriter& w) { w.kv_u32("llama.rope.dimension_count", 20); }));
  EXPECT_NE(e.find("must be even and in (0, head_dim 16]"), std::string::npos) << e;
  // Fewer rotated dims than head_dim is partial rotary (phi3), not an error.
  auto partial = gguf_config(
      write_gguf("ropedim8.gguf", "llama", {"llama.rope.dimension_count"},
                 [](test::GgufWriter& w) { w.kv_u32("llama.rope.dimension_count", 8); }));
  ASSERT_TRUE(partial.ok()) << partial.error().message;
  EXPECT_EQ(partial->rotary_dim, 8);
}

void expect_smollm2(const ModelConfig& c) {
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.rope_theta, 100000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_context, 8192);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
}

TEST(ModelConfigReal, GgufConfig) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->find_tensor("output.weight"), nullptr);  // hence tied embeddings
  auto c = config_from_gguf(*g);
  ASSERT_TRUE(c.ok()) << c.error().message;
  expect_smollm2(*c);
  EXPECT_TRUE(c->rope_interleaved);
  auto loaded = load_model_config(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  expect_smollm2(*loaded);
}

// HuggingFaceTB/SmolLM2-135M-Instruct's config.json.
const char* kSmolLm2Config = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
  "pad_token_id": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_interleaved": false,
  "rope_scaling": null, "rope_theta": 100000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.42.3", "use_cache": true,
  "vocab_size": 49152
})";

TEST(ModelConfigHf, SmolLm2MatchesGguf) {
  auto c = config_from_hf_json(test::write_file("smol/config.json", kSmolLm2Config));
  ASSERT_TRUE(c.ok()) << c.error().message;
  expect_smollm2(*c);
  EXPECT_FALSE(c->rope_interleaved);
}

TEST(ModelConfigHf, Llama31Qwen2Mistral) {
  auto llama = config_from_hf_json(test::write_file("l31.json", R"({"model_type": "llama",
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "rope_scaling": {"factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
    "rope_type": "llama3"}})"));
  ASSERT_TRUE(llama.ok()) << llama.error().message;
  EXPECT_EQ(llama->eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(llama->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(llama->rope_scaling.factor, 8.0);
  EXPECT_EQ(llama->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(llama->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(llama->head_dim, 128);
  EXPECT_FALSE(llama->tie_word_embeddings);
  auto qwen = config_from_hf_json(test::write_file("q2.json", R"({"model_type": "qwen2",
    "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "intermediate_size": 4864, "vocab_size": 151936, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "bos_token_id": 151643,
    "eos_token_id": 151645, "tie_word_embeddings": true, "sliding_window": 32768,
    "use_sliding_window": false, "rope_scaling": {"type": "linear", "factor": 2}})"));
  ASSERT_TRUE(qwen.ok()) << qwen.error().message;
  EXPECT_TRUE(qwen->attention_bias);
  EXPECT_FALSE(qwen->rope_interleaved);
  EXPECT_EQ(qwen->head_dim, 64);
  EXPECT_EQ(qwen->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(qwen->rope_scaling.factor, 2.0);
  auto mistral = config_from_hf_json(test::write_file("m.json", R"({"model_type": "mistral",
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 32768, "head_dim": null, "sliding_window": null})"));
  ASSERT_TRUE(mistral.ok()) << mistral.error().message;
  EXPECT_EQ(mistral->head_dim, 128);
  EXPECT_EQ(mistral->max_context, 131072);  // MistralConfig default
  EXPECT_EQ(mistral->rope_theta, 10000.0);
  EXPECT_EQ(mistral->bos_token_id, 1);
  EXPECT_EQ(mistral->eos_token_ids, std::vector<int32_t>{2});
}

std::string hf_error(const std::string& name, const std::string& json) {
  const std::string path = test::write_file(name, json);
  auto c = config_from_hf_json(path);
  EXPECT_FALSE(c.ok()) << json;
  if (c.ok()) return "";
  EXPECT_NE(c.error().message.find(path), std::string::npos) << c.error().message;
  return c.error().message;
}

// kSmolLm2Config with `from` replaced by `to`.
std::string smol_with(const std::string& from, const std::string& to) {
  std::string s = kSmolLm2Config;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// Qwen/Qwen3-0.6B's config.json (transformers 4.51), and Qwen3Config's
// defaults for what it leaves out (head_dim 128, no bos/eos, context 32768).
TEST(ModelConfigHf, Qwen3) {
  auto c = config_from_hf_json(test::write_file("qwen3.json", R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_EQ(c->head_dim, 128);  // != 1024 / 16
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->rope_interleaved);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->max_context, 40960);
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{151645});
  auto d = config_from_hf_json(test::write_file("qwen3-defaults.json", R"({"model_type": "qwen3",
    "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 512, "vocab_size": 1000})"));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->head_dim, 128);
  EXPECT_EQ(d->num_kv_heads, 4);
  EXPECT_EQ(d->max_context, 32768);
  EXPECT_EQ(d->bos_token_id, -1);
  EXPECT_TRUE(d->eos_token_ids.empty());
}

TEST(ModelConfigHf, Errors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {smol_with("\"hidden_size\": 576,", ""), "\"hidden_size\" is missing"},
      {smol_with("\"model_type\": \"llama\",", ""), "\"model_type\" is missing"},
      {smol_with("\"hidden_size\": 576", "\"hidden_size\": \"576\""),
       "\"hidden_size\" must be an integer (got string)"},
      {smol_with("\"hidden_size\": 576", "\"hidden_size\": 576.5"),
       "\"hidden_size\" must be an integer (got number)"},
      {smol_with("\"num_hidden_layers\": 30", "\"num_hidden_layers\": true"),
       "must be an integer (got bool)"},
      {smol_with("\"vocab_size\": 49152", "\"vocab_size\": 99999999999"), "out of range"},
      {smol_with("\"rope_theta\": 100000", "\"rope_theta\": \"big\""),
       "\"rope_theta\" must be a number"},
      {smol_with("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1"), "must be a bool"},
      {smol_with("\"eos_token_id\": 2", "\"eos_token_id\": [2, \"x\"]"), "eos_token_id"},
      {smol_with("\"model_type\": \"llama\"", "\"model_type\": \"gpt2\""),
       "unsupported model_type 'gpt2'"},
      {smol_with("\"rope_scaling\": null",
                 "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}"),
       "'yarn'"},
      {smol_with("\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"linear\"}"),
       "\"factor\" is missing"},
      {smol_with("\"rope_scaling\": null",
                 "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}"),
       "low_freq_factor"},
      {smol_with("\"rope_scaling\": null", "\"rope_scaling\": 3"), "must be an object"},
      {smol_with("\"num_attention_heads\": 9", "\"num_attention_heads\": 7"), "does not divide"},
      {smol_with("\"num_key_value_heads\": 3", "\"num_key_value_heads\": 2"),
       "num_kv_heads 2 does not divide"},
      {smol_with("\"num_key_value_heads\": 3", "\"num_key_value_heads\": -3"), "must be positive"},
      {smol_with("\"bos_token_id\": 1", "\"bos_token_id\": 50000"),
       "bos_token_id 50000 is outside"},
      {"{\"model_type\": \"llama\",", "invalid JSON"},
      {std::string(kSmolLm2Config) + " {}", "invalid JSON"},
      {"[1]", "not a JSON object"},
  };
  for (const auto& [json, want] : cases) {
    const std::string e = hf_error("bad_config.json", json);
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
  }
  auto missing = config_from_hf_json(test::temp_dir() + "/nope/config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope/config.json"), std::string::npos);
}

TEST(ModelConfigHf, DirectoryMergesGenerationConfig) {
  test::write_file("hfdir/config.json", kSmolLm2Config);
  test::write_file("hfdir/generation_config.json",
                   R"({"eos_token_id": [2, 0], "bos_token_id": 1})");
  auto c = load_model_config(test::temp_dir() + "/hfdir");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 0}));
  auto direct = load_model_config(test::temp_dir() + "/hfdir/config.json");
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->eos_token_ids, std::vector<int32_t>{2});
}

// An HF directory as published: transformers' "very large integer" in
// tokenizer_config.json, a context length beyond the bound (clamped, with a
// note), generation_config.json's eos ids as one integer or a list (an id
// outside the vocabulary is ignored with a note, never a refusal).
TEST(ModelConfigHf, DirectoryWithBigIntegersAndGenerationEos) {
  test::write_file("bigint/config.json",
                   smol_with("\"max_position_embeddings\": 8192",
                             "\"max_position_embeddings\": 1000000000000000019884624838656"));
  test::write_file("bigint/tokenizer_config.json",
                   R"({"model_max_length": 1000000000000000019884624838656, "bos_token": "<s>"})");
  test::write_file("bigint/generation_config.json",
                   R"({"eos_token_id": [2, 0, 99999999999999999999999, 70000], "max_length": 1e30})");
  auto c = load_model_config(test::temp_dir() + "/bigint");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->max_context, int64_t{1} << 21);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 0}));
  ASSERT_EQ(c->notes.size(), 3u);
  EXPECT_NE(c->notes[0].find("clamped to 2097152"), std::string::npos) << c->notes[0];
  EXPECT_NE(c->notes[1].find("ignored"), std::string::npos) << c->notes[1];
  EXPECT_NE(c->notes[2].find("70000"), std::string::npos) << c->notes[2];

  test::write_file("bigint/generation_config.json", R"({"eos_token_id": 0})");
  auto one = load_model_config(test::temp_dir() + "/bigint");
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(one->eos_token_ids, (std::vector<int32_t>{2, 0}));
  test::write_file("bigint/generation_config.json", R"({"eos_token_id": [0, 1],)");
  auto broken = load_model_config(test::temp_dir() + "/bigint");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("generation_config.json: invalid JSON"), std::string::npos)
      << broken.error().message;
}

// tokenizer_config.json with transformers' VERY_LARGE_INTEGER, read by both of
// its readers (the tokenizer's special tokens, the chat template).
TEST(ModelConfigHf, TokenizerConfigWithBigIntegerLoads) {
  const std::string dir = test::temp_dir() + "/bigint-tok";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(PAGODA_TEST_DATA_DIR) + "/tokenizer/qwen2/tokenizer.json",
                             dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  test::write_file("bigint-tok/config.json", kSmolLm2Config);
  test::write_file("bigint-tok/tokenizer_config.json",
                   R"({"model_max_length": 1000000000000000019884624838656,)"
                   R"( "eos_token": "<|im_end|>", "chat_template": "{{ messages[0].content }}"})");
  auto text = load_model_text(dir);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text->chat_template, "{{ messages[0].content }}");
  EXPECT_EQ(text->eos_token, "<|im_end|>");
}

TEST(ModelConfigGguf, ContextLengthAboveTheBoundIsClamped) {
  auto c = gguf_config(write_gguf("bigctx.gguf", "llama", {"llama.context_length"},
                                            [](test::GgufWriter& w) {
                                              w.kv_u64("llama.context_length", uint64_t{1} << 40);
                                            }));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->max_context, int64_t{1} << 21);
  ASSERT_EQ(c->notes.size(), 1u);
}

simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& json) {
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  return doc;
}

TEST(ModelInspect, RealModel) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto json = inspect_model_json(path);
  ASSERT_TRUE(json.ok()) << json.error().message;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parse(parser, *json);
  EXPECT_EQ(std::string_view(doc["format"]), "gguf");
  EXPECT_EQ(std::string_view(doc["architecture"]), "llama");
  EXPECT_EQ(std::string_view(doc["general_name"]), "Smollm2 135M 8k Lc100K Mix1 Ep2");
  EXPECT_EQ(int64_t(doc["gguf_version"]), 3);
  EXPECT_EQ(int64_t(doc["file_size"]), 98362432);
  const std::pair<const char*, int64_t> ints[] = {
      {"num_layers", 30},    {"hidden_size", 576},  {"num_heads", 9},
      {"num_kv_heads", 3},   {"head_dim", 64},      {"intermediate_size", 1536},
      {"vocab_size", 49152}, {"max_context", 8192}, {"bos_token_id", 1},
      {"tensor_count", 272}};
  for (const auto& [key, want] : ints) EXPECT_EQ(int64_t(doc[key]), want) << key;
  EXPECT_EQ(double(doc["rope_theta"]), 100000.0);
  EXPECT_EQ(double(doc["rms_norm_eps"]), 1e-5);
  EXPECT_TRUE(bool(doc["tie_word_embeddings"]));
  EXPECT_TRUE(bool(doc["rope_interleaved"]));
  EXPECT_FALSE(bool(doc["attention_bias"]));
  EXPECT_EQ(std::string_view(doc["rope_scaling"]["type"]), "none");
  EXPECT_EQ(int64_t(doc["eos_token_ids"].at(0)), 2);
  EXPECT_EQ(int64_t(doc["tensors_by_dtype"]["Q4_1"]), 210);
  EXPECT_EQ(int64_t(doc["tensors_by_dtype"]["Q8_0"]), 1);
  EXPECT_EQ(int64_t(doc["tensors_by_dtype"]["F32"]), 61);
}

TEST(ModelInspect, SafetensorsDirectory) {
  test::write_file("inspect_hf/config.json", kSmolLm2Config);
  const std::string header =
      R"({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}, "v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  const auto file = Bytes().u64(header.size()).raw(header).u32(0).u32(0).b;
  test::write_file("inspect_hf/model.safetensors", file);
  auto json = inspect_model_json(test::temp_dir() + "/inspect_hf");
  ASSERT_TRUE(json.ok()) << json.error().message;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parse(parser, *json);
  EXPECT_EQ(std::string_view(doc["format"]), "safetensors");
  EXPECT_EQ(int64_t(doc["file_size"]), static_cast<int64_t>(file.size()));
  EXPECT_EQ(int64_t(doc["tensor_count"]), 2);
  EXPECT_EQ(int64_t(doc["tensors_by_dtype"]["BF16"]), 1);
  EXPECT_FALSE(bool(doc["rope_interleaved"]));
  EXPECT_FALSE(inspect_model_json(test::temp_dir() + "/absent.gguf").ok());
}

TEST(ModelInspect, JsonQuote) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("\n\t\r\x01\x1f"), "\"\\n\\t\\r\\u0001\\u001f\"");
  EXPECT_EQ(json_quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(json_quote("\xff\xc3"), "\"\\ufffd\\ufffd\"");  // invalid / truncated
  EXPECT_EQ(json_quote("\xc0\xaf\xed\xa0\x80"),
            "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"");  // overlong, surrogate
  EXPECT_EQ(json_quote(std::string_view("a\0b", 3)), "\"a\\u0000b\"");
  simdjson::dom::parser parser;
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  simdjson::dom::element doc = parse(parser, "{\"k\": " + json_quote(all) + "}");
  EXPECT_EQ(std::string_view(doc["k"]).substr(0, 128), std::string_view(all).substr(0, 128));
}

// transformers >= 5 writes "rope_parameters" (theta + scaling in one object) and
// null bos/eos ids; the tiny golden models were saved that way.
TEST(ModelConfigHf, RopeParametersOfTransformers5) {
  const std::string dir = std::string(PAGODA_TEST_DATA_DIR) + "/logits/";
  Result<ModelConfig> llama = config_from_hf_json(dir + "tiny-llama/config.json");
  ASSERT_TRUE(llama.ok()) << llama.error().message;
  EXPECT_EQ(llama->rope_theta, 10000.0);
  EXPECT_EQ(llama->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(llama->rope_scaling.factor, 4.0);
  EXPECT_EQ(llama->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(llama->rope_scaling.original_max_position_embeddings, 64);
  EXPECT_FALSE(llama->tie_word_embeddings);
  Result<ModelConfig> qwen = config_from_hf_json(dir + "tiny-qwen2/config.json");
  ASSERT_TRUE(qwen.ok()) << qwen.error().message;
  EXPECT_EQ(qwen->rope_theta, 1000000.0);
  EXPECT_EQ(qwen->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_TRUE(qwen->tie_word_embeddings);
  EXPECT_TRUE(qwen->attention_bias);
  EXPECT_EQ(qwen->num_kv_heads, 2);
  EXPECT_EQ(qwen->head_dim, 16);
}

}  // namespace
}  // namespace pagoda::model
