// bench_overlap: what scheduling one step ahead buys. For each model, each
// concurrency C and overlap on/off, C greedy requests (--prompt random ids,
// --tokens new tokens, ignore_eos) are submitted at once to a fresh engine
// (CPU backend, quantized weights, max_num_seqs = C) and run to the end.
// Per executed step (the engine's own accounting, see EngineStats): wall =
// end of step to end of next step, compute = the executor's forward +
// sampling, host = wall - compute (host work on the critical path between
// two steps). From the client side: output tok/s and inter-token latency
// p50/p99 (arrival times of every sample's tokens). Prints one JSON object.
//
//   bench_overlap [--model PATH] [--tiny DIR] [--concurrency 1,64,256]
//                 [--prompt 32] [--tokens 64] [--repeats 1] [--booking progress|send]
//                 [--prepare-ahead on|off]
//   --tiny: a config.json directory run with --load-format dummy f32 (a
//   tiny random model: compute is small, so overhead shows); "" skips it
//   (and --model "" skips the real model).
//   --overlap on|off: run one mode only (for profiling; no pairs).
//   --booking progress|send: with overlap, book each step when the one in
//   flight reports progress (default) or as soon as it is sent.
//   --prepare-ahead on|off: the executor prepares each step while the one
//   before runs on its step thread (default), or runs each step whole
//   (ExecutorOptions::prepare_ahead). Each row reports the executor's
//   preparation per step on the critical path (prep_us) and the part hidden
//   behind the step before (ahead_us, over all steps; ahead_steps of them).
//   --repeats R: R on/off pairs per model and concurrency, run interleaved
//   (on,off / off,on alternately, so a slow drift of a shared machine hits
//   both modes alike); "pairs" then summarises each configuration by the
//   per-pair ratio on/off of output tok/s (median, min, max, pairs won).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "actors/engine.hpp"

namespace {

using pagoda::actors::Engine;
using pagoda::actors::EngineOptions;
using pagoda::actors::GenerateRequest;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model, tiny = "model/configs/tiny";
  std::vector<int32_t> concurrency = {1, 64, 256};
  int32_t prompt = 32, tokens = 64, repeats = 1;
  std::string modes = "both";  // on | off | both
  bool book_at_send = false;   // overlap on: --booking send (EngineOptions::book_on_progress off)
  bool prepare_ahead = true;   // --prepare-ahead on|off
};

std::vector<int32_t> int_list(const std::string& v) {
  std::vector<int32_t> out;
  std::stringstream ss(v);
  for (std::string part; std::getline(ss, part, ',');) out.push_back(std::stoi(part));
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  const char* home = std::getenv("HOME");
  a.model = std::string(home ? home : "") + "/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model = v;
    else if (k == "--tiny") a.tiny = v;
    else if (k == "--concurrency") a.concurrency = int_list(v);
    else if (k == "--prompt") a.prompt = std::stoi(v);
    else if (k == "--tokens") a.tokens = std::stoi(v);
    else if (k == "--repeats") a.repeats = std::max(1, std::stoi(v));
    else if (k == "--overlap" && (v == "on" || v == "off" || v == "both")) a.modes = v;
    else if (k == "--booking" && (v == "progress" || v == "send")) a.book_at_send = v == "send";
    else if (k == "--prepare-ahead" && (v == "on" || v == "off")) a.prepare_ahead = v == "on";
    else {
      std::fprintf(stderr, "bench_overlap: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Token arrival times of one request (one sample).
class TimingSink : public pagoda::actors::RequestSink {
 public:
  bool on_token(const pagoda::actors::TokenDelta&) override {
    std::lock_guard<std::mutex> lock(mu_);
    times_.push_back(Clock::now());
    return true;
  }
  void on_done(const pagoda::actors::RequestDone&) override { finish(); }
  void on_error(const std::string& m) override {
    std::fprintf(stderr, "bench_overlap: request failed: %s\n", m.c_str());
    finish();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  std::vector<Clock::time_point> times() {
    std::lock_guard<std::mutex> lock(mu_);
    return times_;
  }

 private:
  void finish() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<Clock::time_point> times_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  return v[i];
}

struct Case {
  const char* model_name;
  std::string path;
  bool dummy;
};

// Runs one configuration on a fresh engine, prints its row (comma first
// unless first) and returns its output tok/s.
double run_case(const Case& m, const Args& a, int32_t c, bool overlap, int32_t repeat, bool first) {
  EngineOptions o;
  o.model_path = m.path;
  o.backend = pagoda::gpu::BackendKind::kCpu;
  o.precision = pagoda::model::WeightPrecision::kQuantized;
  if (m.dummy) {
    o.load_format = pagoda::model::LoadFormat::kDummy;
    o.dummy_dtype = pagoda::model::DummyDtype::kF32;
  }
  o.max_num_seqs = c;
  o.max_num_batched_tokens = std::max(512, c);
  o.max_model_len = a.prompt + a.tokens + 16;
  o.num_blocks = c * ((o.max_model_len + 15) / 16) + 16;
  o.async_scheduling = overlap;
  o.book_on_progress = !a.book_at_send;
  o.prepare_ahead = a.prepare_ahead;
  auto engine = Engine::start(o);
  if (!engine) {
    std::fprintf(stderr, "bench_overlap: %s\n", engine.error().message.c_str());
    std::exit(1);
  }
  std::mt19937 rng(7);
  std::vector<std::shared_ptr<TimingSink>> sinks;
  const auto t0 = Clock::now();
  for (int32_t i = 0; i < c; ++i) {
    GenerateRequest r;
    for (int32_t k = 0; k < a.prompt; ++k) r.prompt_ids.push_back(int32_t(100 + rng() % 20000));
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = a.tokens;
    r.sampling.ignore_eos = true;
    r.sampling.seed = uint64_t(i) + 1;
    sinks.push_back(std::make_shared<TimingSink>());
    (*engine)->submit(std::move(r), sinks.back());
  }
  std::vector<double> itl;
  size_t tokens = 0;
  for (auto& s : sinks) {
    s->wait();
    const auto t = s->times();
    tokens += t.size();
    for (size_t i = 1; i < t.size(); ++i) itl.push_back(std::chrono::duration<double>(t[i] - t[i - 1]).count());
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto st = (*engine)->stats();
  const double n = std::max<double>(1.0, double(st.timed_steps));
  const double step = st.step_wall_s / n, compute = st.step_compute_s / n, host = st.step_host_s / n;
  const double tok_per_s = double(tokens) / wall;
  std::printf(
      "%s    {\"model\": \"%s\", \"concurrency\": %d, \"overlap\": %s, \"repeat\": %d, \"steps\": %llu, "
      "\"step_ms\": %.3f, \"compute_ms\": %.3f, \"host_ms\": %.3f, \"host_share\": %.4f, "
      "\"prep_us\": %.2f, \"ahead_us\": %.2f, \"ahead_steps\": %llu, "
      "\"itl_p50_ms\": %.3f, \"itl_p99_ms\": %.3f, \"output_tok_per_s\": %.1f, \"tokens\": %zu}",
      first ? "" : ",\n", m.model_name, c, overlap ? "true" : "false", repeat,
      (unsigned long long)st.timed_steps, step * 1e3,
      compute * 1e3, host * 1e3, step > 0 ? host / step : 0.0, st.step_prep_s / n * 1e6,
      st.step_ahead_prep_s / n * 1e6, (unsigned long long)st.steps_prepared_ahead,
      percentile(itl, 0.5) * 1e3,
      percentile(itl, 0.99) * 1e3, tok_per_s, tokens);
  std::fflush(stdout);
  return tok_per_s;
}

struct PairSummary {
  std::string model;
  int32_t concurrency;
  std::vector<double> ratios;  // on / off output tok/s, one per pair
};

void print_pairs(const std::vector<PairSummary>& pairs) {
  std::printf("\n  ],\n  \"pairs\": [\n");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    const auto wins = std::count_if(p.ratios.begin(), p.ratios.end(), [](double r) { return r >= 1.0; });
    std::printf(
        "    {\"model\": \"%s\", \"concurrency\": %d, \"pairs\": %zu, \"on_over_off_median\": %.4f, "
        "\"min\": %.4f, \"max\": %.4f, \"on_not_slower\": %lld}%s\n",
        p.model.c_str(), p.concurrency, p.ratios.size(), percentile(p.ratios, 0.5),
        *std::min_element(p.ratios.begin(), p.ratios.end()),
        *std::max_element(p.ratios.begin(), p.ratios.end()), (long long)wins,
        i + 1 == pairs.size() ? "" : ",");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::vector<Case> models;
  if (!a.model.empty()) models.push_back({"smollm2-135m-q4_1", a.model, false});
  if (!a.tiny.empty()) models.push_back({"tiny-random", a.tiny, true});
  std::printf("{\n  \"rows\": [\n");
  std::vector<PairSummary> pairs;
  bool first = true;
  for (const Case& m : models) {
    for (const int32_t c : a.concurrency) {
      PairSummary p{m.model_name, c, {}};
      for (int32_t r = 0; r < a.repeats; ++r) {
        double tps[2] = {0, 0};  // [off, on]
        for (int k = 0; k < 2; ++k) {
          const bool on = (k == 0) == (r % 2 == 0);  // on first in even pairs
          if (a.modes != "both" && on != (a.modes == "on")) continue;
          tps[on] = run_case(m, a, c, on, r, first);
          first = false;
        }
        if (a.modes == "both") p.ratios.push_back(tps[0] > 0 ? tps[1] / tps[0] : 0.0);
      }
      if (!p.ratios.empty()) pairs.push_back(std::move(p));
    }
  }
  print_pairs(pairs);
  std::printf("  ]\n}\n");
  return 0;
}
