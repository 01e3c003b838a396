// Helpers of the engine fault suites (engine_faults_test,
// engine_supervision_test): id prompts, a sink that records how one request
// ended, and a request run alone for its reference tokens.
// Thread-safety: EndSink's callbacks arrive on the engine's threads; its
// accessors lock, so a test thread may read them at any time.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"

namespace pagoda::test {

// The fault suites' engine: CPU, quantized, a small pool and batch.
inline actors::EngineOptions fault_options(const std::string& path) {
  return cpu_engine_options(path, model::WeightPrecision::kQuantized, 256, 16, 128);
}

inline actors::GenerateRequest ids_request(std::vector<int32_t> ids, int32_t max_tokens) {
  actors::GenerateRequest r;
  r.prompt_ids = std::move(ids);
  r.sampling = greedy(max_tokens);
  return r;
}

// A deterministic prompt of len ids; different salts give different prompts.
inline std::vector<int32_t> id_prompt(int32_t len, int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < len; ++i) p.push_back(100 + (i * 37 + salt * 101) % 5000);
  return p;
}

// How one request ended: on_done's first finish reason, or error from on_error.
class EndSink : public actors::RequestSink {
 public:
  bool on_token(const actors::TokenDelta& d) override {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_.push_back(d.token_id);
    return true;
  }
  void on_done(const actors::RequestDone& done) override {
    std::lock_guard<std::mutex> lock(mu_);
    finish_ = done.finish.empty() ? actors::FinishReason::none : done.finish[0];
    promise_.set_value();
  }
  void on_error(const std::string& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = message;
    finish_ = actors::FinishReason::error;
    promise_.set_value();
  }
  bool wait(std::chrono::milliseconds s) { return future_.wait_for(s) == std::future_status::ready; }
  actors::FinishReason finish() {
    std::lock_guard<std::mutex> lock(mu_);
    return finish_;
  }
  std::vector<int32_t> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }

 private:
  std::mutex mu_;
  std::vector<int32_t> tokens_;
  actors::FinishReason finish_ = actors::FinishReason::none;
  std::string error_;
  std::promise<void> promise_;
  std::future<void> future_ = promise_.get_future();
};

// The greedy tokens of ids run alone (an empty vector, and a test failure,
// when the request fails).
inline std::vector<int32_t> alone(actors::EngineClient& e, const std::vector<int32_t>& ids,
                                  int32_t max_tokens) {
  auto r = e.generate({ids_request(ids, max_tokens)});
  EXPECT_TRUE(r[0].error.empty()) << r[0].error;
  return r[0].samples.empty() ? std::vector<int32_t>{} : r[0].samples[0].token_ids;
}

}  // namespace pagoda::test
