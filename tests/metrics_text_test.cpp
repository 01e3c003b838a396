// metrics_text: the Prometheus text exposition checked by a small
// independent reader (every sample's family has # HELP and # TYPE before it,
// histogram buckets are cumulative and non-decreasing, +Inf == _count) and
// the values against hand-computed ones.
#include "net/metrics_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "metrics_check.hpp"

namespace pagoda::net {
namespace {

actors::EngineStats sample_stats() {
  actors::EngineStats s;
  s.running = 3;
  s.waiting = 2;
  s.kv_blocks_total = 200;
  s.kv_blocks_used = 50;
  s.kv_blocks_free = 150;
  s.kv_blocks_cached = 7;
  s.prefix_queried_tokens = 1000;
  s.prefix_hit_tokens = 640;
  s.preemptions = 4;
  s.urgent_prefill_steps = 3;
  s.prompt_tokens = 1234;
  s.generation_tokens = 5678;
  // TTFT: 0.0007 s (first bucket), 0.03 s twice (le 0.05), 100 s (+Inf only).
  s.ttft.counts[0] = 1;
  s.ttft.counts[5] = 2;
  s.ttft.counts[actors::LatencyHistogram::kBounds.size()] = 1;
  s.ttft.count = 4;
  s.ttft.sum = 0.0007 + 0.06 + 100.0;
  s.itl.counts[3] = 10;  // (0.005, 0.01]
  s.itl.count = 10;
  s.itl.sum = 0.08;
  return s;
}

TEST(MetricsText, ParsesAndEveryFamilyIsTyped) {
  const std::string text = metrics_text(sample_stats(), ServerCounters{5, 77, 3}, "SmolLM2 \"q\"");
  test::MetricsCheck check = test::check_metrics(text);
  EXPECT_TRUE(check.errors.empty()) << check.errors << "\n" << text;
  EXPECT_EQ(check.types.at("pagoda:time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(check.types.at("pagoda:num_requests_running"), "gauge");
  EXPECT_EQ(check.types.at("pagoda:prompt_tokens_total"), "counter");
  // The label value is escaped.
  EXPECT_NE(text.find("model_name=\"SmolLM2 \\\"q\\\"\""), std::string::npos) << text;
}

TEST(MetricsText, ValuesMatchTheStats) {
  const std::string text = metrics_text(sample_stats(), ServerCounters{5, 77, 3}, "m");
  test::MetricsCheck c = test::check_metrics(text);
  ASSERT_TRUE(c.errors.empty()) << c.errors;
  const std::string l = "{model_name=\"m\"}";
  EXPECT_EQ(c.values.at("pagoda:num_requests_running" + l), 3);
  EXPECT_EQ(c.values.at("pagoda:num_requests_waiting" + l), 2);
  EXPECT_DOUBLE_EQ(c.values.at("pagoda:kv_cache_usage_perc" + l), 0.25);
  EXPECT_EQ(c.values.at("pagoda:kv_blocks_total" + l), 200);
  EXPECT_EQ(c.values.at("pagoda:kv_blocks_used" + l), 50);
  EXPECT_EQ(c.values.at("pagoda:kv_blocks_free" + l), 150);
  EXPECT_EQ(c.values.at("pagoda:kv_blocks_cached" + l), 7);
  EXPECT_EQ(c.values.at("pagoda:prefix_cache_queries_total" + l), 1000);
  EXPECT_EQ(c.values.at("pagoda:prefix_cache_hits_total" + l), 640);
  EXPECT_EQ(c.values.at("pagoda:num_preemptions_total" + l), 4);
  EXPECT_EQ(c.values.at("pagoda:urgent_prefill_steps_total" + l), 3);
  EXPECT_EQ(c.values.at("pagoda:prompt_tokens_total" + l), 1234);
  EXPECT_EQ(c.values.at("pagoda:generation_tokens_total" + l), 5678);
  EXPECT_EQ(c.values.at("pagoda:http_requests_total" + l), 77);
  EXPECT_EQ(c.values.at("pagoda:requests_rejected_total" + l), 3);
  EXPECT_EQ(c.values.at("pagoda:connections" + l), 5);
  // Cumulative buckets, computed by hand from the counts above.
  const std::string h = "pagoda:time_to_first_token_seconds";
  EXPECT_EQ(c.values.at(h + "_bucket{model_name=\"m\",le=\"0.001\"}"), 1);
  EXPECT_EQ(c.values.at(h + "_bucket{model_name=\"m\",le=\"0.025\"}"), 1);
  EXPECT_EQ(c.values.at(h + "_bucket{model_name=\"m\",le=\"0.05\"}"), 3);
  EXPECT_EQ(c.values.at(h + "_bucket{model_name=\"m\",le=\"60\"}"), 3);
  EXPECT_EQ(c.values.at(h + "_bucket{model_name=\"m\",le=\"+Inf\"}"), 4);
  EXPECT_EQ(c.values.at(h + "_count" + l), 4);
  EXPECT_NEAR(c.values.at(h + "_sum" + l), 100.0607, 1e-9);
  const std::string i = "pagoda:inter_token_latency_seconds";
  EXPECT_EQ(c.values.at(i + "_bucket{model_name=\"m\",le=\"0.005\"}"), 0);
  EXPECT_EQ(c.values.at(i + "_bucket{model_name=\"m\",le=\"0.01\"}"), 10);
  EXPECT_EQ(c.values.at(i + "_count" + l), 10);
}

// Speculative decoding: one sample per proposer; their sum is the total, and
// the acceptance rate is per proposer (NaN for one that never drafted).
TEST(MetricsText, SpeculativeCountersByProposer) {
  actors::EngineStats s = sample_stats();
  s.spec.ngram = {40, 30};
  s.spec.draft = {0, 0};
  test::MetricsCheck c = test::check_metrics(metrics_text(s, ServerCounters{}, "m"));
  ASSERT_TRUE(c.errors.empty()) << c.errors;
  EXPECT_EQ(c.types.at("pagoda:spec_decode_num_draft_tokens_total"), "counter");
  EXPECT_EQ(c.types.at("pagoda:spec_decode_draft_acceptance_rate"), "gauge");
  const std::string ngram = "{model_name=\"m\",proposer=\"ngram\"}";
  const std::string draft = "{model_name=\"m\",proposer=\"draft\"}";
  EXPECT_EQ(c.values.at("pagoda:spec_decode_num_draft_tokens_total" + ngram), 40);
  EXPECT_EQ(c.values.at("pagoda:spec_decode_num_accepted_tokens_total" + ngram), 30);
  EXPECT_EQ(c.values.at("pagoda:spec_decode_num_draft_tokens_total" + draft), 0);
  EXPECT_DOUBLE_EQ(c.values.at("pagoda:spec_decode_draft_acceptance_rate" + ngram), 0.75);
  EXPECT_TRUE(std::isnan(c.values.at("pagoda:spec_decode_draft_acceptance_rate" + draft)));
  s.spec.draft = {10, 9};
  c = test::check_metrics(metrics_text(s, ServerCounters{}, "m"));
  EXPECT_EQ(c.values.at("pagoda:spec_decode_num_accepted_tokens_total" + draft), 9);
  EXPECT_DOUBLE_EQ(c.values.at("pagoda:spec_decode_draft_acceptance_rate" + draft), 0.9);
  EXPECT_DOUBLE_EQ(c.values.at("pagoda:spec_decode_draft_acceptance_rate" + ngram), 0.75);
}

TEST(MetricsText, EmptyPoolGivesZeroUsage) {
  test::MetricsCheck c = test::check_metrics(metrics_text(actors::EngineStats{}, ServerCounters{}, "m"));
  ASSERT_TRUE(c.errors.empty()) << c.errors;
  EXPECT_EQ(c.values.at("pagoda:kv_cache_usage_perc{model_name=\"m\"}"), 0.0);
}

// The checker itself catches what it is meant to catch.
TEST(MetricsCheck, DetectsBrokenExpositions) {
  const std::string untyped = "# HELP a x\na{l=\"1\"} 1\n";
  EXPECT_FALSE(test::check_metrics(untyped).errors.empty());
  const std::string decreasing =
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"2\"} 2\n"
      "h_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n";
  EXPECT_FALSE(test::check_metrics(decreasing).errors.empty());
  const std::string inf_mismatch =
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n";
  EXPECT_FALSE(test::check_metrics(inf_mismatch).errors.empty());
  const std::string bad_value = "# HELP g x\n# TYPE g gauge\ng 1.2.3\n";
  EXPECT_FALSE(test::check_metrics(bad_value).errors.empty());
  const std::string good =
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n";
  EXPECT_TRUE(test::check_metrics(good).errors.empty()) << test::check_metrics(good).errors;
}

}  // namespace
}  // namespace pagoda::net
