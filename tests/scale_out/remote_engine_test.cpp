// Scale-out over CAF's io middleman in one process (docs/scaling.md): the
// wire types serialize (inspect + add_message_type), an EngineNode on
// loopback behind a RemoteEngine gives the in-process engine's tokens, a
// front end of another protocol version is refused with a clear error, and a
// node stopped mid-stream ends the stream with engine_unavailable. The
// multi-process checks are tests/python/test_scale_out.py.
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "actors/scale_out/engine_node.hpp"
#include "actors/scale_out/remote_engine.hpp"
#include "actors/scale_out/remote_protocol.hpp"
#include "server_engine_options.hpp"

namespace pagoda::actors {
namespace {

std::string model_path() {
  if (const char* env = std::getenv("PAGODA_MODEL")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Runs fn(system) on a thread that builds and destroys its own middleman
// system (CAF 0.17 wants ~actor_system on the constructing thread).
template <class Fn>
void with_io_system(Fn fn) {
  std::thread t([&] {
    caf::actor_system_config cfg;
    cfg.load<caf::io::middleman>();
    add_remote_message_types(cfg);
    caf::actor_system sys{cfg};
    fn(sys);
  });
  t.join();
}

TEST(RemoteProtocol, EveryWireMessageRoundTrips) {
  WireSubmit w;
  w.wire = 42;
  w.prompt = {1, 2, 3};
  w.seed = 99;
  w.options.temperature = 0.5f;
  w.options.stop = {"END"};
  w.options.n = 3;
  w.options.beam_width = 0;
  w.options.constraint = {OutputConstraint::Kind::choice, "", {"yes", "no"}, true};
  w.options.token_mask.logit_bias = {{5, -2.5f}, {9, 100.0f}};
  w.options.token_mask.bad_words = {"darn"};
  WireEvents ev;
  ev.wire = 42;
  SeqEvent e;
  e.index = 2;
  e.has_token = true;
  e.sample.token = 77;
  e.sample.top_tokens = {77, 5};
  e.finish = FinishReason::length;
  e.beams = {BeamResult{{4, 5}, -1.5, -0.7, FinishReason::stop}};
  ev.events = {e};
  NodeReport r;
  r.waiting = 3;
  r.cached_hashes = {1ull << 60, 7};
  r.spec.ngram = {12, 7};
  r.spec.draft = {5, 4};
  r.queue.observe(0.003);
  r.queue.observe(120.0);
  with_io_system([&](caf::actor_system& sys) {
    std::vector<char> buf;
    caf::binary_serializer out{sys, buf};
    auto msg = caf::make_message(submit_atom::value, w, ev, r, NodeHello{kRemoteProtocolVersion, "m", "/p", 10});
    ASSERT_FALSE(out(msg)) << "a wire type is not registered";
    caf::message back;
    caf::binary_deserializer in{sys, buf};
    ASSERT_FALSE(in(back));
    ASSERT_TRUE((back.match_elements<submit_atom, WireSubmit, WireEvents, NodeReport, NodeHello>()));
    const auto& w2 = back.get_as<WireSubmit>(1);
    EXPECT_EQ(w2.prompt, w.prompt);
    EXPECT_EQ(w2.seed, 99u);
    EXPECT_EQ(w2.options.stop, w.options.stop);
    EXPECT_EQ(w2.options.n, 3);
    EXPECT_FLOAT_EQ(w2.options.temperature, 0.5f);
    EXPECT_EQ(w2.options.constraint.kind, OutputConstraint::Kind::choice);
    EXPECT_EQ(w2.options.constraint.choices, w.options.constraint.choices);
    EXPECT_TRUE(w2.options.constraint.strict);
    EXPECT_EQ(w2.options.token_mask.logit_bias, w.options.token_mask.logit_bias);
    EXPECT_EQ(w2.options.token_mask.bad_words, w.options.token_mask.bad_words);
    const SeqEvent& e2 = back.get_as<WireEvents>(2).events.at(0);
    EXPECT_EQ(e2.sample.token, 77);
    EXPECT_EQ(e2.sample.top_tokens, e.sample.top_tokens);
    EXPECT_EQ(e2.finish, FinishReason::length);
    EXPECT_EQ(e2.beams.at(0).tokens, e.beams[0].tokens);
    EXPECT_EQ(e2.beams.at(0).finish, FinishReason::stop);
    EXPECT_EQ(back.get_as<NodeReport>(3).cached_hashes, r.cached_hashes);
    const SpecStats& spec = back.get_as<NodeReport>(3).spec;
    EXPECT_EQ(spec.ngram.drafted, 12u);
    EXPECT_EQ(spec.ngram.accepted, 7u);
    EXPECT_EQ(spec.draft.drafted, 5u);
    EXPECT_EQ(spec.draft.accepted, 4u);
    const LatencyHistogram& q = back.get_as<NodeReport>(3).queue;
    EXPECT_EQ(q.count, 2u);
    EXPECT_DOUBLE_EQ(q.sum, 120.003);
    EXPECT_EQ(q.counts, r.queue.counts);
    EXPECT_EQ(q.counts[2] + q.counts.back(), 2u);  // (0.0025, 0.005] and +Inf
    EXPECT_EQ(back.get_as<NodeHello>(4).model_path, "/p");
  });
}

// Collects one request's stream.
class Collect : public RequestSink {
 public:
  bool on_token(const TokenDelta& d) override {
    if (d.token_id >= 0) {
      ids.push_back(d.token_id);
      if (ids.size() == 3) first.set_value();
    }
    return true;
  }
  void on_done(const RequestDone&) override { end.set_value(""); }
  void on_error(const std::string& m) override { end.set_value(m); }
  std::vector<int32_t> ids;
  std::promise<void> first;
  std::promise<std::string> end;
};

class RemoteEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(model_path())) GTEST_SKIP() << "model not found at " << model_path();
    auto e = Engine::start(test::server_engine_options(model_path()));
    ASSERT_TRUE(e.ok()) << e.error().message;
    engine_ = std::shared_ptr<Engine>(std::move(*e));
    auto n = EngineNode::start(engine_, EngineNodeOptions{"127.0.0.1", 0});
    ASSERT_TRUE(n.ok()) << n.error().message;
    node_ = std::move(*n);
  }
  void TearDown() override {
    if (node_) node_->stop();
    if (engine_) engine_->shutdown();
  }
  std::unique_ptr<RemoteEngine> front() {
    RemoteEngineOptions o;
    o.model_path = model_path();
    o.nodes = {NodeAddress{"127.0.0.1", node_->port()}};
    auto r = RemoteEngine::start(o);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? std::move(*r) : nullptr;
  }
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<EngineNode> node_;
};

GenerateRequest greedy(const std::string& prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

TEST_F(RemoteEngineTest, RemoteTokensEqualInProcessTokens) {
  auto remote = front();
  ASSERT_TRUE(remote);
  auto sink = std::make_shared<Collect>();
  remote->submit(greedy("The quick brown fox", 12), sink);
  auto end = sink->end.get_future();
  ASSERT_EQ(end.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(end.get(), "");
  // The node's queue time reaches the front end's stats with its next report.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (remote->stats().queue.count == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(remote->stats().queue.count, engine_->stats().queue.count);
  EXPECT_EQ(remote->stats().queue.count, 1u);
  std::vector<GenerateRequest> local = {greedy("The quick brown fox", 12)};
  EXPECT_EQ(sink->ids, engine_->generate(std::move(local)).at(0).samples.at(0).token_ids);
  EXPECT_EQ(remote->model_name(), engine_->model_name());
  EXPECT_EQ(remote->max_model_len(), engine_->max_model_len());
}

TEST_F(RemoteEngineTest, AnotherProtocolVersionIsRefused) {
  std::string refusal;
  with_io_system([&](caf::actor_system& sys) {
    auto entry = sys.middleman().remote_actor("127.0.0.1", node_->port());
    ASSERT_TRUE(entry) << sys.render(entry.error());
    caf::scoped_actor self{sys};
    self->request(*entry, std::chrono::seconds(10), hello_atom::value, kRemoteProtocolVersion + 1)
        .receive([&](const NodeHello&) { refusal = "accepted"; },
                 [&](caf::error& e) { refusal = sys.render(e); });
  });
  EXPECT_NE(refusal.find("protocol version mismatch"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find(std::to_string(kRemoteProtocolVersion + 1)), std::string::npos) << refusal;
}

TEST_F(RemoteEngineTest, NodeGoneMidStreamEndsWithEngineUnavailable) {
  auto remote = front();
  ASSERT_TRUE(remote);
  auto sink = std::make_shared<Collect>();
  remote->submit(greedy("Tell me a very long story", 4000), sink);
  ASSERT_EQ(sink->first.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  node_->stop();  // the front end sees the node go
  auto end = sink->end.get_future();
  ASSERT_EQ(end.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(end.get().rfind("engine_unavailable", 0), 0u);
  // Nothing left to route to: a new request fails at once, clearly.
  auto later = std::make_shared<Collect>();
  remote->submit(greedy("Hello", 4), later);
  auto end2 = later->end.get_future();
  ASSERT_EQ(end2.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(end2.get().find("no engine node is up"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::actors
