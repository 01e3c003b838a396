// The scale-out front end's per-node /metrics lines (net/metrics_text.hpp,
// engine_node_metrics_text): well formed (tests/metrics_check.hpp), one
// sample per node per family with its node label, values from the nodes.
#include <gtest/gtest.h>

#include "metrics_check.hpp"
#include "net/metrics_text.hpp"

namespace pagoda::net {
namespace {

TEST(EngineNodeMetrics, OneLabelledSamplePerNode) {
  std::vector<actors::EngineNodeInfo> nodes(2);
  nodes[0] = {"10.0.0.1:7100", true, 2, 5, 100, 40, 640, 9, 4};
  nodes[1] = {"10.0.0.2:7100", false, 0, 0, 0, 0, 0, 3, 0};
  const std::string text = engine_node_metrics_text(nodes, "m");
  test::MetricsCheck c = test::check_metrics(text);
  ASSERT_TRUE(c.errors.empty()) << c.errors << "\n" << text;
  const std::string a = "{model_name=\"m\",node=\"10.0.0.1:7100\"}", b = "{model_name=\"m\",node=\"10.0.0.2:7100\"}";
  EXPECT_EQ(c.values.at("pagoda:engine_node_up" + a), 1);
  EXPECT_EQ(c.values.at("pagoda:engine_node_up" + b), 0);
  EXPECT_EQ(c.values.at("pagoda:engine_node_requests_waiting" + a), 2);
  EXPECT_EQ(c.values.at("pagoda:engine_node_seqs_running" + a), 5);
  EXPECT_EQ(c.values.at("pagoda:engine_node_kv_blocks_total" + a), 100);
  EXPECT_EQ(c.values.at("pagoda:engine_node_kv_blocks_used" + a), 40);
  EXPECT_EQ(c.values.at("pagoda:engine_node_prefix_cache_hits_total" + a), 640);
  EXPECT_EQ(c.values.at("pagoda:engine_node_routed_total" + b), 3);
  EXPECT_EQ(c.values.at("pagoda:engine_node_prefix_routed_total" + a), 4);
  EXPECT_EQ(c.types.at("pagoda:engine_node_routed_total"), "counter");
  EXPECT_EQ(c.types.at("pagoda:engine_node_up"), "gauge");
}

TEST(EngineNodeMetrics, NothingForAnInProcessEngine) {
  EXPECT_EQ(engine_node_metrics_text({}, "m"), "");
}

}  // namespace
}  // namespace pagoda::net
