// `pagoda inspect`'s quant mix (model/model_inspect.hpp): tensor types by
// tensor group, on a tiny GGUF with a known mix of types and on the real
// default model (SmolLM2 Q4_1).
#include "model/model_inspect.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>

#include "formats_test_util.hpp"
#include "tiny_gguf_writer.hpp"

namespace pagoda::model {
namespace {

std::string mix_of(simdjson::dom::element doc, const char* group) {
  std::string_view v;
  if (doc["quant_mix"][group].get(v) != simdjson::SUCCESS) return "<absent>";
  return std::string(v);
}

TEST(ModelInspectQuantMix, TinyGgufGroupsTypesByTensorGroup) {
  test::TinyGgufOptions o;
  o.quant_type = 6;                       // Q5_0 where rows are a whole number of blocks
  o.keep_f32 = {"blk.1.attn_v.weight"};   // one layer's V stays F32
  const std::string path =
      test::write_tiny_gguf(std::string(PAGODA_TEST_DATA_DIR) + "/logits/tiny-llama", "mix", o);
  auto json = inspect_model_json(path);
  ASSERT_TRUE(json.ok()) << json.error().message;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(*json).get(doc), simdjson::SUCCESS) << *json;
  EXPECT_EQ(mix_of(doc, "attn_q"), "Q5_0 x3");
  EXPECT_EQ(mix_of(doc, "attn_v"), "Q5_0 x2, F32 x1");
  EXPECT_EQ(mix_of(doc, "ffn_down"), "F32 x3");  // rows of 200: not whole Q5_0 blocks
  EXPECT_EQ(mix_of(doc, "attn_norm"), "F32 x3");
  EXPECT_EQ(mix_of(doc, "token_embd"), "Q5_0 x1");
  EXPECT_EQ(mix_of(doc, "output"), "Q5_0 x1");
  EXPECT_EQ(mix_of(doc, "rope_freqs"), "F32 x1");
  EXPECT_EQ(mix_of(doc, "blk"), "<absent>");
}

TEST(ModelInspectQuantMix, RealModel) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto json = inspect_model_json(path);
  ASSERT_TRUE(json.ok()) << json.error().message;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(*json).get(doc), simdjson::SUCCESS);
  for (const char* g : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                        "ffn_down"}) {
    EXPECT_EQ(mix_of(doc, g), "Q4_1 x30") << g;
  }
  EXPECT_EQ(mix_of(doc, "token_embd"), "Q8_0 x1");
  EXPECT_EQ(mix_of(doc, "attn_norm"), "F32 x30");
  EXPECT_EQ(mix_of(doc, "output_norm"), "F32 x1");
}

}  // namespace
}  // namespace pagoda::model
