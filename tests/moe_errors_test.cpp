// MoE configs and files that do not fit: each is an Error that names the
// file, the tensor or key, and (for shapes) both shapes; nothing crashes.
// Copies of the tiny Qwen3-MoE / Mixtral directories with one config value
// changed (tools/gen-arch-goldens.py made the originals).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "formats_test_util.hpp"
#include "llama_test_util.hpp"
#include "model/llama_model.hpp"
#include "model/model_config.hpp"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

// A copy of tiny model `name` whose config.json has `from` replaced by `to`.
std::string edited_copy(const std::string& name, const std::string& from, const std::string& to) {
  const fs::path dir =
      fs::path(test::temp_dir()) / (name + "-" + std::to_string(std::hash<std::string>()(to)));
  fs::create_directories(dir);
  const fs::path src = test::logits_data(name);
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  std::ifstream in(src / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string cfg = text.str();
  const size_t at = cfg.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) cfg.replace(at, from.size(), to);
  std::ofstream(dir / "config.json") << cfg;
  return dir.string();
}

std::string load_error(const std::string& path) {
  auto backend = test::cpu_backend();
  model::LoadOptions o;
  o.max_num_batched_tokens = 16;
  o.max_num_seqs = 2;
  auto m = model::LlamaModel::load(path, *backend, o);
  EXPECT_FALSE(m.ok()) << path;
  return m.ok() ? "" : m.error().message;
}

TEST(MoeErrors, AnExpertCountOfAnotherFileIsNamedAtTheRouter) {
  // 5 experts in the config, 4 in the file: the router is the first tensor that disagrees.
  const std::string msg = load_error(
      edited_copy("tiny-qwen3moe", "\"num_local_experts\": 4", "\"num_local_experts\": 5"));
  EXPECT_NE(msg.find("tensor model.layers.0.mlp.gate.weight has shape [4, 256], expected [5, 256]"),
            std::string::npos)
      << msg;
  const std::string mix = load_error(
      edited_copy("tiny-mixtral", "\"num_local_experts\": 4", "\"num_local_experts\": 5"));
  EXPECT_NE(mix.find("tensor model.layers.0.block_sparse_moe.gate.weight has shape [4, 256], "
                     "expected [5, 256]"),
            std::string::npos)
      << mix;
}

TEST(MoeErrors, AWrongExpertShapeNamesBothShapes) {
  const std::string msg = load_error(edited_copy("tiny-qwen3moe", "\"moe_intermediate_size\": 32",
                                                 "\"moe_intermediate_size\": 64"));
  EXPECT_NE(
      msg.find(
          "model.layers.0.mlp.experts.0.gate_proj.weight has shape [32, 256], expected [64, 256]"),
      std::string::npos)
      << msg;
  // Mixtral's expert size is intermediate_size.
  const std::string mix = load_error(
      edited_copy("tiny-mixtral", "\"intermediate_size\": 32", "\"intermediate_size\": 64"));
  EXPECT_NE(mix.find("experts.0.w1.weight has shape [32, 256], expected [64, 256]"),
            std::string::npos)
      << mix;
}

TEST(MoeErrors, BadRoutingSettingsAreRefused) {
  auto c = model::load_model_config(
      edited_copy("tiny-qwen3moe", "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 5"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("num_experts_used 5 must be in [1, num_experts 4]"),
            std::string::npos)
      << c.error().message;
  auto dense = model::load_model_config(
      edited_copy("tiny-qwen3moe", "\"mlp_only_layers\": []", "\"mlp_only_layers\": [1]"));
  ASSERT_FALSE(dense.ok());
  EXPECT_NE(dense.error().message.find("mlp_only_layers"), std::string::npos)
      << dense.error().message;
  auto step = model::load_model_config(
      edited_copy("tiny-qwen3moe", "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2"));
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.error().message.find("decoder_sparse_step"), std::string::npos)
      << step.error().message;
}

}  // namespace
}  // namespace pagoda
