// The engine with a model whose every layer attends through a sliding window
// (tiny-mistral-swa's weights with window 37, so that a window spans five
// 8-token blocks and releasing one block too many, or too early while the
// step in flight still reads it, lets another sequence overwrite keys a
// query reads): the blocks outside the window go back to the pool while
// sequences run, so four 20 + 150-token sequences (43 blocks each without
// it) run together in a 64-block pool without preemption, and their tokens and logprobs equal
// those of a run that frees nothing in a pool large enough for all of them
// (a block read after it went back and was reused by another sequence would
// change them), in both scheduling modes; in a roomy pool the same prompts
// again hit the prefix cache in the released blocks and still give the same
// tokens; n > 1
// (forks share the released prefix) too; every block comes back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"

#include <unistd.h>

namespace pagoda {
namespace {

using actors::Engine;
using actors::GenerateResult;

constexpr int32_t kWindow = 37, kBlock = 8;

// tiny-mistral-swa with sliding_window kWindow, in a temporary folder.
std::string windowed_model() {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(PAGODA_TEST_DATA_DIR) / "logits" / "tiny-mistral-swa";
  const fs::path dir = fs::temp_directory_path() / ("pagoda_window_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  std::ifstream in(src / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string key = "\"sliding_window\": 5";
  const size_t at = config.find(key);
  EXPECT_NE(at, std::string::npos) << config;
  if (at != std::string::npos) config.replace(at, key.size(), "\"sliding_window\": " + std::to_string(kWindow));
  std::ofstream(dir / "config.json") << config;
  return dir.string();
}

const std::string& model_dir() {
  static const std::string dir = windowed_model();
  return dir;
}

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int32_t i = 0; i < 4; ++i) {
    std::vector<int32_t> p;
    for (int32_t t = 0; t < 20; ++t) p.push_back(3 + (i * 37 + t * 11) % 150);
    out.push_back(p);
  }
  return out;
}

// caching off: a released block goes to the free list, which hands it out
// again at once (LIFO), so a release that comes too soon is overwritten.
std::unique_ptr<Engine> start(int32_t blocks, bool free_window, bool async, bool caching = false) {
  actors::EngineOptions o = test::cpu_engine_options(model_dir(), model::WeightPrecision::kExact, blocks, 8, 64);
  o.block_size = kBlock;
  o.max_model_len = 256;
  o.free_out_of_window_blocks = free_window;
  o.async_scheduling = async;
  o.enable_prefix_caching = caching;
  auto e = Engine::start(o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST(EngineWindow, OutOfWindowBlocksGoBackWithoutChangingTokens) {
  const auto requests = test::id_requests(prompts(), test::greedy(150));
  auto reference = start(128, /*free_window=*/false, true);
  ASSERT_NE(reference, nullptr);
  const std::vector<GenerateResult> want = reference->generate(requests);
  EXPECT_GE(reference->stats().peak_kv_blocks_used, 4 * 21) << "the run without release holds every block";
  for (bool async : {true, false}) {
    SCOPED_TRACE(async ? "one step ahead" : "lockstep");
    auto e = start(40, /*free_window=*/true, async);
    ASSERT_NE(e, nullptr);
    test::expect_same(e->generate(requests), want, "window release");
    EXPECT_EQ(e->stats().preemptions, 0u) << "40 blocks hold the four sequences only with the release";
    EXPECT_LE(e->stats().peak_kv_blocks_used, 40);
    test::expect_blocks_back(*e);
  }
  // A pool large enough that nothing is evicted: the prompt blocks released
  // during the first round stay cached and the second round hits them.
  auto roomy = start(128, /*free_window=*/true, true, /*caching=*/true);
  ASSERT_NE(roomy, nullptr);
  test::expect_same(roomy->generate(requests), want, "window release, roomy pool");
  EXPECT_LE(roomy->stats().peak_kv_blocks_used, 40) << "blocks were not released";
  const uint64_t hits = roomy->stats().prefix_hit_tokens;
  test::expect_same(roomy->generate(requests), want, "again, from the prefix cache");
  EXPECT_EQ(roomy->stats().prefix_hit_tokens - hits, 4u * 16u) << "each prompt's 2 full blocks";
  test::expect_blocks_back(*roomy);
}

TEST(EngineWindow, ParallelSamplesShareTheReleasedPrefix) {
  actors::SamplingOptions s;
  s.temperature = 0.8f;
  s.max_tokens = 120;
  s.ignore_eos = true;
  s.seed = 5;
  s.n = 3;
  auto requests = test::id_requests({prompts()[0]}, s);
  auto reference = start(128, false, true);
  ASSERT_NE(reference, nullptr);
  const GenerateResult want = reference->generate(requests)[0];
  auto e = start(32, true, true);
  ASSERT_NE(e, nullptr);
  const GenerateResult got = e->generate(requests)[0];
  ASSERT_TRUE(got.error.empty()) << got.error;
  ASSERT_EQ(got.samples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got.samples[i].token_ids, want.samples[i].token_ids) << i;
  EXPECT_EQ(e->stats().preemptions, 0u);
  test::expect_blocks_back(*e);
}

}  // namespace
}  // namespace pagoda
