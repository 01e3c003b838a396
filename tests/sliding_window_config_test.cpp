// The sliding windows of the non-Gemma families in config.json, as
// transformers 5 applies them (model/sliding_window_config.cpp): Mistral's
// default window when the key is absent and none when it is null; Mixtral and
// Phi-3 only when set; Qwen2/Qwen3 only with use_sliding_window, on the
// layers from max_window_layers or those layer_types lists; Qwen3-MoE on every
// layer; Llama never; bad values refused with the file named. The forward
// pass with these windows is checked against HF's logits by
// llama_fidelity_test (TinyFidelity.*SlidingWindow*).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "formats_test_util.hpp"
#include "model/model_config.hpp"
#include "model/model_inspect.hpp"

namespace pagoda {
namespace {

using model::ModelConfig;

// config.json of a 4-layer model of `type` with the extra fields, in its own folder.
Result<ModelConfig> hf(const std::string& name, const std::string& type, const std::string& fields) {
  const std::string dir = test::temp_dir() + "/" + name;
  std::filesystem::create_directories(dir);
  test::write_file(name + "/config.json",
                   "{\"model_type\": \"" + type + "\", \"num_hidden_layers\": 4, \"hidden_size\": 64,"
                   " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 128,"
                   " \"vocab_size\": 32064, \"max_position_embeddings\": 8192" +
                   (fields.empty() ? "" : ", " + fields) + "}");
  return model::load_model_config(dir);
}

const std::vector<bool> kAll(4, true);

TEST(SlidingWindowHf, MistralDefaultsTo4096AndNullTurnsItOff) {
  auto absent = hf("m-absent", "mistral", "");
  ASSERT_TRUE(absent.ok()) << absent.error().message;
  EXPECT_EQ(absent->sliding_window, 4096);  // MistralConfig's default
  EXPECT_EQ(absent->sliding_layers, kAll);
  auto null = hf("m-null", "mistral", "\"sliding_window\": null");
  ASSERT_TRUE(null.ok()) << null.error().message;
  EXPECT_EQ(null->sliding_window, 0);
  EXPECT_TRUE(null->sliding_layers.empty());
  // MistralConfig ignores layer_types: every layer is windowed.
  auto typed = hf("m-typed", "mistral", "\"sliding_window\": 64, \"layer_types\": [\"full_attention\","
                                        " \"full_attention\", \"full_attention\", \"full_attention\"]");
  ASSERT_TRUE(typed.ok()) << typed.error().message;
  EXPECT_EQ(typed->sliding_window, 64);
  EXPECT_EQ(typed->sliding_layers, kAll);
}

TEST(SlidingWindowHf, MixtralAndPhi3OnlyWhenSet) {
  for (const char* type : {"mixtral", "phi3"}) {
    SCOPED_TRACE(type);
    auto absent = hf(std::string(type) + "-absent", type, "");
    ASSERT_TRUE(absent.ok()) << absent.error().message;
    EXPECT_EQ(absent->sliding_window, 0);
    auto set = hf(std::string(type) + "-set", type, "\"sliding_window\": 2047");
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_EQ(set->sliding_window, 2047);
    EXPECT_EQ(set->sliding_layers, kAll);
  }
}

TEST(SlidingWindowHf, QwenNeedsUseSlidingWindow) {
  for (const char* type : {"qwen2", "qwen3"}) {
    SCOPED_TRACE(type);
    // Published Qwen configs: a window written but not used.
    auto off = hf(std::string(type) + "-off", type,
                  "\"sliding_window\": 4096, \"use_sliding_window\": false, \"max_window_layers\": 2");
    ASSERT_TRUE(off.ok()) << off.error().message;
    EXPECT_EQ(off->sliding_window, 0);
    auto from = hf(std::string(type) + "-from", type,
                   "\"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 2");
    ASSERT_TRUE(from.ok()) << from.error().message;
    EXPECT_EQ(from->sliding_window, 32);
    EXPECT_EQ(from->sliding_layers, (std::vector<bool>{false, false, true, true}));
    auto typed = hf(std::string(type) + "-typed", type,
                    "\"sliding_window\": 32, \"use_sliding_window\": true, \"layer_types\":"
                    " [\"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\"]");
    ASSERT_TRUE(typed.ok()) << typed.error().message;
    EXPECT_EQ(typed->sliding_layers, (std::vector<bool>{true, false, true, false}));
    auto deflt = hf(std::string(type) + "-default", type, "\"use_sliding_window\": true");
    ASSERT_TRUE(deflt.ok()) << deflt.error().message;
    EXPECT_EQ(deflt->sliding_window, 4096);  // the config class default
    EXPECT_EQ(deflt->sliding_layers, std::vector<bool>(4, false));  // max_window_layers 28 > 4 layers
  }
}

TEST(SlidingWindowHf, Qwen3MoeEveryLayerLlamaNever) {
  auto moe = hf("q3moe", "qwen3_moe",
                "\"use_sliding_window\": true, \"sliding_window\": 16, \"num_experts\": 4,"
                " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32");
  ASSERT_TRUE(moe.ok()) << moe.error().message;
  EXPECT_EQ(moe->sliding_window, 16);
  EXPECT_EQ(moe->sliding_layers, kAll);
  auto llama = hf("l-window", "llama", "\"sliding_window\": 16");
  ASSERT_TRUE(llama.ok()) << llama.error().message;
  EXPECT_EQ(llama->sliding_window, 0);
}

// `pagoda inspect` shows the window and how many layers use it.
TEST(SlidingWindowHf, InspectShowsTheWindow) {
  ASSERT_TRUE(hf("inspect-q3", "qwen3", "\"sliding_window\": 32, \"use_sliding_window\": true,"
                                        " \"max_window_layers\": 1").ok());
  test::write_file("inspect-q3/model.safetensors",
                   std::string("\x02\x00\x00\x00\x00\x00\x00\x00{}", 10));
  auto json = model::inspect_model_json(test::temp_dir() + "/inspect-q3");
  ASSERT_TRUE(json.ok()) << json.error().message;
  EXPECT_NE(json->find("\"sliding_window\": 32"), std::string::npos) << *json;
  EXPECT_NE(json->find("\"windowed_layers\": 3"), std::string::npos) << *json;
}

TEST(SlidingWindowHf, BadValuesNameTheFile) {
  auto negative = hf("m-negative", "mistral", "\"sliding_window\": -5");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("m-negative/config.json"), std::string::npos);
  EXPECT_NE(negative.error().message.find("sliding_window"), std::string::npos);
  auto text = hf("m-text", "mistral", "\"sliding_window\": \"big\"");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("sliding_window"), std::string::npos);
  auto short_types = hf("q-types", "qwen3", "\"use_sliding_window\": true, \"layer_types\": [\"full_attention\"]");
  ASSERT_FALSE(short_types.ok());
  EXPECT_NE(short_types.error().message.find("layer_types"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
