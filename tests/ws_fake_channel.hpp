// Test helpers for the /v1/ws protocol: a fake WsChannel that records the
// server's frames (parsed with simdjson's DOM parser, independently of the
// serializer) and can refuse frames (closed) or fake a full outgoing queue.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/ws_channel.hpp"

namespace pagoda::net::test {

// The fields of one server frame that the tests look at.
struct Frame {
  std::string raw, type, code, message, text;
  std::optional<std::string> id;
  int64_t index = -1, token_id = -1, prompt_tokens = -1, completion_tokens = -1;
  int64_t total = -1, used = -1, free = -1, cached = -1, blocks_total = -1;
  bool has_logprob = false, terminal = false;
  double logprob = 0.0;
  std::vector<int64_t> top_ids;
  std::vector<double> top_lps;
  std::vector<std::string> finish;
  struct Beam {
    std::vector<int64_t> ids;
    double cumulative = 0.0, score = 0.0;
    bool finished = false;
  };
  std::vector<Beam> beams;
  bool has_beams = false;
  size_t state_len = 0, ref_len = 0, owners_len = 0, seqs = 0;
  std::map<std::string, std::string> mine;
};

inline int64_t int_or(simdjson::dom::element e, const char* key, int64_t dflt) {
  int64_t v = 0;
  return e[key].get(v) == simdjson::SUCCESS ? v : dflt;
}

inline void read_beams(simdjson::dom::array arr, Frame& f) {
  f.has_beams = true;
  for (simdjson::dom::element b : arr) {
    Frame::Beam beam;
    for (int64_t t : b["token_ids"].get_array()) beam.ids.push_back(t);
    beam.cumulative = b["cumulative_logprob"].get_double();
    beam.score = b["score"].get_double();
    beam.finished = b["finished"].get_bool();
    f.beams.push_back(beam);
  }
}

inline void read_kv(simdjson::dom::element e, Frame& f) {
  f.total = int_or(e, "total", -1);
  f.used = int_or(e, "used", -1);
  f.free = int_or(e, "free", -1);
  f.cached = int_or(e, "cached", -1);
  f.state_len = std::string_view(e["state"].get_string()).size();
  f.ref_len = e["ref"].get_array().size();
  f.owners_len = e["owners"].get_array().size();
  f.seqs = e["seqs"].get_array().size();
  for (auto field : e["mine"].get_object()) {
    f.mine[std::string(field.key)] = std::string(field.value.get_string().value());
  }
}

inline Frame parse_frame(const std::string& raw) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  Frame f;
  f.raw = raw;
  EXPECT_EQ(parser.parse(raw).get(e), simdjson::SUCCESS) << raw;
  f.type = std::string(e["type"].get_string().value());
  std::string_view s;
  if (e["id"].get_string().get(s) == simdjson::SUCCESS) f.id = std::string(s);
  if (e["code"].get_string().get(s) == simdjson::SUCCESS) f.code = std::string(s);
  if (e["message"].get_string().get(s) == simdjson::SUCCESS) f.message = std::string(s);
  if (e["text"].get_string().get(s) == simdjson::SUCCESS) f.text = std::string(s);
  f.index = int_or(e, "index", -1);
  f.token_id = int_or(e, "token_id", -1);
  f.prompt_tokens = int_or(e, "prompt_tokens", -1);
  f.blocks_total = int_or(e, "kv_blocks_total", -1);
  f.has_logprob = e["logprob"].get(f.logprob) == simdjson::SUCCESS;
  if (f.type == "error") {
    bool has_terminal = e["terminal"].get(f.terminal) == simdjson::SUCCESS;
    EXPECT_TRUE(has_terminal) << raw;
  }
  simdjson::dom::array arr;
  if (e["top_logprobs"].get(arr) == simdjson::SUCCESS) {
    for (simdjson::dom::element t : arr) {
      f.top_ids.push_back(int64_t(t["token_id"]));
      f.top_lps.push_back(double(t["logprob"]));
    }
  }
  if (e["finish_reasons"].get(arr) == simdjson::SUCCESS) {
    for (simdjson::dom::element r : arr) f.finish.emplace_back(std::string_view(r.get_string()));
  }
  simdjson::dom::element usage;
  if (e["usage"].get(usage) == simdjson::SUCCESS) {
    f.prompt_tokens = int_or(usage, "prompt_tokens", -1);
    f.completion_tokens = int_or(usage, "completion_tokens", -1);
  }
  if (e["beams"].get(arr) == simdjson::SUCCESS) read_beams(arr, f);
  if (f.type == "kv") read_kv(e, f);
  return f;
}

// Records frames; can refuse them (closed) and fake a full queue.
class FakeChannel final : public WsChannel {
 public:
  bool send_text(std::string frame) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    frames_.push_back(parse_frame(frame));
    cv_.notify_all();
    return true;
  }
  void close(uint16_t, std::string) override { set_closed(); }
  size_t queued_bytes() const override { return queued.load(); }

  void set_closed() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  std::vector<Frame> frames() {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_;
  }
  Frame last() {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_.empty() ? Frame{} : frames_.back();
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_.size();
  }
  // Waits until pred(frames) holds (60 s at most).
  bool wait(const std::function<bool(const std::vector<Frame>&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return pred(frames_); });
  }
  std::atomic<size_t> queued{0};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Frame> frames_;
  bool closed_ = false;
};

}  // namespace pagoda::net::test
