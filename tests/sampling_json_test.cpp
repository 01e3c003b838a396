// apply_sampling_field / finish_sampling: every field's accepted types,
// nulls, errors naming the field, and beam-search resolution.
#include "net/sampling_json.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pagoda::net {
namespace {

struct Applied {
  Result<void> status;
  actors::SamplingOptions options;
  bool use_beam_search = false;
  std::vector<std::string> unknown;  // keys apply_sampling_field did not take
};

// Applies every field of the JSON object `json`, then finish_sampling.
Applied apply_all(const std::string& json) {
  Applied out;
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  EXPECT_EQ(parser.parse(json).get(obj), simdjson::SUCCESS) << json;
  for (auto field : obj) {
    auto r = apply_sampling_field(field.key, field.value, out.options, out.use_beam_search);
    if (!r) {
      out.status = r.error();
      return out;
    }
    if (!*r) out.unknown.emplace_back(field.key);
  }
  out.status = finish_sampling(out.options, out.use_beam_search);
  return out;
}

std::string error_of(const std::string& json) {
  Applied a = apply_all(json);
  return a.status ? std::string("<ok>") : a.status.error().message;
}

TEST(SamplingJson, DefaultsWhenEmpty) {
  Applied a = apply_all("{}");
  ASSERT_TRUE(a.status);
  EXPECT_EQ(a.options.max_tokens, 16);
  EXPECT_EQ(a.options.n, 1);
  EXPECT_FLOAT_EQ(a.options.temperature, 1.0f);
  EXPECT_FALSE(a.options.seed.has_value());
}

TEST(SamplingJson, EveryFieldIsRead) {
  Applied a = apply_all(R"({"temperature":0.5,"top_k":40,"top_p":0.9,"min_p":0.05,
      "repetition_penalty":1.1,"presence_penalty":0.5,"frequency_penalty":-0.5,"seed":1234,
      "stop":["\n\n","END"],"stop_token_ids":[2,7],"max_tokens":64,"min_tokens":3,
      "ignore_eos":true,"n":3,"length_penalty":0.8,"early_stopping":false,"user":"x","priority":-4,
      "metadata":{}})");
  ASSERT_TRUE(a.status) << a.status.error().message;
  const auto& o = a.options;
  EXPECT_FLOAT_EQ(o.temperature, 0.5f);
  EXPECT_EQ(o.top_k, 40);
  EXPECT_FLOAT_EQ(o.top_p, 0.9f);
  EXPECT_FLOAT_EQ(o.min_p, 0.05f);
  EXPECT_FLOAT_EQ(o.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(o.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(o.frequency_penalty, -0.5f);
  ASSERT_TRUE(o.seed.has_value());
  EXPECT_EQ(*o.seed, 1234u);
  EXPECT_EQ(o.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(o.stop_token_ids, (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(o.max_tokens, 64);
  EXPECT_EQ(o.min_tokens, 3);
  EXPECT_TRUE(o.ignore_eos);
  EXPECT_EQ(o.n, 3);
  EXPECT_FLOAT_EQ(o.length_penalty, 0.8f);
  EXPECT_FALSE(o.early_stopping);
  EXPECT_EQ(o.beam_width, 0);
  EXPECT_EQ(o.client, "user:x");
  EXPECT_EQ(o.priority, -4);
  EXPECT_EQ(a.unknown, (std::vector<std::string>{"metadata"}));
}

TEST(SamplingJson, StopAsSingleStringAndNullsKeepDefaults) {
  Applied a = apply_all(R"({"stop":"###","temperature":null,"seed":null,"n":null})");
  ASSERT_TRUE(a.status);
  EXPECT_EQ(a.options.stop, (std::vector<std::string>{"###"}));
  EXPECT_FLOAT_EQ(a.options.temperature, 1.0f);
  EXPECT_FALSE(a.options.seed.has_value());
  EXPECT_EQ(a.options.n, 1);
}

TEST(SamplingJson, IntegersAcceptIntegralFloatsOnly) {
  Applied a = apply_all(R"({"max_tokens":8.0,"temperature":1})");
  ASSERT_TRUE(a.status);
  EXPECT_EQ(a.options.max_tokens, 8);
  EXPECT_FLOAT_EQ(a.options.temperature, 1.0f);
  EXPECT_EQ(error_of(R"({"max_tokens":8.5})"), "max_tokens must be an integer");
  EXPECT_EQ(error_of(R"({"max_tokens":"8"})"), "max_tokens must be an integer");
  EXPECT_EQ(error_of(R"({"n":true})"), "n must be an integer");
  EXPECT_EQ(error_of(R"({"max_tokens":99999999999})"), "max_tokens must be in [-2147483648, 2147483647]");
}

TEST(SamplingJson, WrongTypesNameTheField) {
  EXPECT_EQ(error_of(R"({"temperature":"hot"})"), "temperature must be a number");
  EXPECT_EQ(error_of(R"({"top_p":[1]})"), "top_p must be a number");
  EXPECT_EQ(error_of(R"({"stop":5})"), "stop must be a string or an array of strings");
  EXPECT_EQ(error_of(R"({"stop":["a",1]})"), "stop must be a string or an array of strings");
  EXPECT_EQ(error_of(R"({"stop_token_ids":[1,-2]})"), "stop_token_ids must be an array of non-negative integers");
  EXPECT_EQ(error_of(R"({"stop_token_ids":3})"), "stop_token_ids must be an array of integers");
  EXPECT_EQ(error_of(R"({"ignore_eos":1})"), "ignore_eos must be a boolean");
  EXPECT_EQ(error_of(R"({"use_beam_search":"yes"})"), "use_beam_search must be a boolean");
  EXPECT_EQ(error_of(R"({"seed":1.5})"), "seed must be an integer");
  EXPECT_EQ(error_of(R"({"temperature":1e300})"), "temperature must be a finite number");
}

TEST(SamplingJson, RangesAreValidated) {
  EXPECT_EQ(error_of(R"({"temperature":-1})"), "temperature must be >= 0");
  EXPECT_EQ(error_of(R"({"top_p":0})"), "top_p must be in (0, 1]");
  EXPECT_EQ(error_of(R"({"min_p":1.5})"), "min_p must be in [0, 1]");
  EXPECT_EQ(error_of(R"({"max_tokens":0})"), "max_tokens must be >= 1");
  EXPECT_EQ(error_of(R"({"n":0})"), "n must be in [1, 16]");
  EXPECT_EQ(error_of(R"({"n":17})"), "n must be in [1, 16]");
  EXPECT_EQ(error_of(R"({"presence_penalty":2.5})"), "presence_penalty must be in [-2, 2]");
  EXPECT_EQ(error_of(R"({"frequency_penalty":-3})"), "frequency_penalty must be in [-2, 2]");
  EXPECT_EQ(error_of(R"({"top_k":-2})"), "top_k must be -1, 0 (disabled) or a positive integer");
  EXPECT_EQ(error_of(R"({"stop":[""]})"), "stop strings must not be empty");
  EXPECT_EQ(error_of(R"({"min_tokens":20,"max_tokens":10})"), "min_tokens must be in [0, max_tokens]");
}

TEST(SamplingJson, TopKMinusOneDisables) {
  Applied a = apply_all(R"({"top_k":-1})");
  ASSERT_TRUE(a.status);
  EXPECT_EQ(a.options.top_k, 0);
}

TEST(SamplingJson, NegativeSeedWrapsAndLargeSeedIsKept) {
  Applied a = apply_all(R"({"seed":-1})");
  ASSERT_TRUE(a.status);
  EXPECT_EQ(*a.options.seed, 18446744073709551615ULL);
  Applied b = apply_all(R"({"seed":18446744073709551615})");
  ASSERT_TRUE(b.status);
  EXPECT_EQ(*b.options.seed, 18446744073709551615ULL);
}

TEST(SamplingJson, BeamSearchResolution) {
  Applied a = apply_all(R"({"use_beam_search":true})");
  ASSERT_TRUE(a.status);
  EXPECT_EQ(a.options.beam_width, 2);
  Applied b = apply_all(R"({"use_beam_search":true,"n":4})");
  ASSERT_TRUE(b.status);
  EXPECT_EQ(b.options.beam_width, 4);
  Applied c = apply_all(R"({"use_beam_search":true,"n":2,"beam_width":5})");
  ASSERT_TRUE(c.status);
  EXPECT_EQ(c.options.beam_width, 5);
  Applied d = apply_all(R"({"beam_width":3})");
  ASSERT_TRUE(d.status);
  EXPECT_EQ(d.options.beam_width, 3);
  EXPECT_EQ(error_of(R"({"beam_width":2,"n":3})"), "n must be <= beam_width for beam search");
  EXPECT_EQ(error_of(R"({"beam_width":99})").rfind("beam_width must be in [0, ", 0), 0u);
}

}  // namespace
}  // namespace pagoda::net
