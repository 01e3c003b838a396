// bench_engine: the engine on the real model (CPU backend, quantized weights)
// under a deterministic mixed-length synthetic load; prints one JSON object.
//
//   bench_engine [--model PATH] [--prompts 48] [--kv-blocks 1024] [--block-size 16]
//                [--contiguous-lens 8192,2048] [--steps 40]
//                [--rows load,parallel,parallel_mixed,contiguous,beam]
//
// Rows:
//   load        : --prompts requests (std::mt19937 seed 42: prompt lengths
//                 16..512 of random ids, max_tokens 16..128, greedy,
//                 ignore_eos) submitted at once to a paged engine with
//                 --kv-blocks blocks; wall time, generated tokens/s, TTFT /
//                 ITL means, KV utilisation (mean of per-step samples), peak
//                 concurrent sequences, preemptions.
//   parallel    : one request with n = 4 (temperature 0.8) vs 4 independent
//                 requests with the same 256-token prompt (each max_tokens
//                 64), each on a fresh engine with prefix caching OFF, so the
//                 independent ones cannot share the prompt through the cache;
//                 peak used blocks of each.
//   parallel_mixed: the same over 6 prompts of random length --mixed-min ..
//                 --mixed-max (default 32..640; max_tokens --mixed-tokens, 48):
//                 6 n = 4 groups vs 24 independent requests, concurrently.
//   contiguous  : the same load on a contiguous-layout engine with the same
//                 --kv-blocks (equal KV memory), per max_model_len in
//                 --contiguous-lens; run for --steps steps (admission is
//                 settled by then), then shut down; peak concurrent sequences.
//   beam        : one beam_width = 4 request vs 4 independent greedy requests,
//                 the same 256-token prompt, 64 new tokens each (ignore_eos,
//                 so every beam runs to max_tokens), prefix caching OFF, each
//                 on a fresh engine; peak used blocks of each.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/engine.hpp"

namespace {

using pagoda::actors::Engine;
using pagoda::actors::EngineOptions;
using pagoda::actors::EngineStats;
using pagoda::actors::GenerateRequest;
using pagoda::actors::KvLayout;
using pagoda::actors::RequestDone;
using pagoda::actors::RequestSink;
using pagoda::actors::TokenDelta;

struct Args {
  std::string model;
  int32_t prompts = 48, kv_blocks = 1024, block_size = 16, steps = 40;
  std::vector<int32_t> contiguous_lens = {8192, 2048};
  int32_t mixed_min = 32, mixed_max = 640, mixed_tokens = 48;  // parallel_mixed load
  std::string rows = "load,parallel,parallel_mixed,contiguous,beam";
  bool row(const std::string& name) const { return ("," + rows + ",").find("," + name + ",") != std::string::npos; }
};

Args parse(int argc, char** argv) {
  Args a;
  const char* home = std::getenv("HOME");
  a.model = std::string(home ? home : "") + "/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model = v;
    else if (k == "--prompts") a.prompts = std::stoi(v);
    else if (k == "--kv-blocks") a.kv_blocks = std::stoi(v);
    else if (k == "--block-size") a.block_size = std::stoi(v);
    else if (k == "--steps") a.steps = std::stoi(v);
    else if (k == "--rows") a.rows = v;
    else if (k == "--mixed-min") a.mixed_min = std::stoi(v);
    else if (k == "--mixed-max") a.mixed_max = std::stoi(v);
    else if (k == "--mixed-tokens") a.mixed_tokens = std::stoi(v);
    else if (k == "--contiguous-lens") {
      a.contiguous_lens.clear();
      std::stringstream ss(v);
      for (std::string part; std::getline(ss, part, ',');) a.contiguous_lens.push_back(std::stoi(part));
    } else {
      std::fprintf(stderr, "bench_engine: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

std::vector<GenerateRequest> make_load(int32_t count) {
  std::mt19937 rng(42);
  std::vector<GenerateRequest> out;
  for (int32_t i = 0; i < count; ++i) {
    GenerateRequest r;
    const int32_t len = 16 + int32_t(rng() % 497);  // 16..512
    for (int32_t k = 0; k < len; ++k) r.prompt_ids.push_back(int32_t(100 + rng() % 20000));
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 16 + int32_t(rng() % 113);  // 16..128
    r.sampling.ignore_eos = true;
    r.sampling.seed = uint64_t(i) + 1;
    out.push_back(std::move(r));
  }
  return out;
}

EngineOptions base(const Args& a) {
  EngineOptions o;
  o.model_path = a.model;
  o.backend = pagoda::gpu::BackendKind::kCpu;
  o.precision = pagoda::model::WeightPrecision::kQuantized;
  o.num_blocks = a.kv_blocks;
  o.block_size = a.block_size;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 512;
  o.max_model_len = 8192;
  return o;
}

std::unique_ptr<Engine> start(const EngineOptions& o) {
  auto e = Engine::start(o);
  if (!e) {
    std::fprintf(stderr, "bench_engine: %s\n", e.error().message.c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double mean(const pagoda::actors::LatencyHistogram& h) { return h.count ? h.sum / double(h.count) : 0.0; }

void load_row(const Args& a) {
  auto e = start(base(a));
  const auto t0 = std::chrono::steady_clock::now();
  auto res = e->generate(make_load(a.prompts));
  const double wall = seconds_since(t0);
  int errors = 0;
  for (const auto& r : res) errors += r.error.empty() ? 0 : 1;
  const EngineStats s = e->stats();
  std::printf(
      "  \"load\": {\"requests\": %d, \"errors\": %d, \"kv_blocks\": %d, \"prompt_tokens\": %llu, "
      "\"generated_tokens\": %llu, \"wall_s\": %.2f, \"generated_tokens_per_s\": %.1f, "
      "\"total_tokens_per_s\": %.1f, \"ttft_mean_s\": %.3f, \"itl_mean_s\": %.4f, "
      "\"kv_utilisation_mean\": %.4f, \"kv_utilisation_samples\": %llu, \"peak_running_seqs\": %d, "
      "\"peak_kv_blocks_used\": %d, \"preemptions\": %llu, \"steps\": %llu},\n",
      a.prompts, errors, s.kv_blocks_total, (unsigned long long)s.prompt_tokens,
      (unsigned long long)s.generation_tokens, wall, double(s.generation_tokens) / wall,
      double(s.generation_tokens + s.prompt_tokens) / wall, mean(s.ttft), mean(s.itl),
      s.kv_utilisation_mean, (unsigned long long)s.kv_utilisation_samples, s.peak_running_seqs,
      s.peak_kv_blocks_used, (unsigned long long)s.preemptions, (unsigned long long)s.steps);
}

int32_t peak_blocks(const Args& a, std::vector<GenerateRequest> reqs) {
  EngineOptions o = base(a);
  o.enable_prefix_caching = false;
  auto e = start(o);
  e->generate(std::move(reqs));
  return e->stats().peak_kv_blocks_used;
}

void parallel_row(const Args& a) {
  GenerateRequest r;
  std::mt19937 rng(7);
  for (int k = 0; k < 256; ++k) r.prompt_ids.push_back(int32_t(100 + rng() % 20000));
  r.sampling.temperature = 0.8f;
  r.sampling.max_tokens = 64;
  r.sampling.ignore_eos = true;
  r.sampling.seed = 99;
  std::vector<GenerateRequest> independent(4, r);
  for (int i = 0; i < 4; ++i) independent[size_t(i)].sampling.seed = r.sampling.seed_for(i);
  r.sampling.n = 4;
  const int32_t group = peak_blocks(a, {r});
  const int32_t apart = peak_blocks(a, independent);
  std::printf(
      "  \"parallel\": {\"prompt_tokens\": 256, \"max_tokens\": 64, \"prefix_caching\": false, "
      "\"n4_peak_blocks\": %d, \"independent4_peak_blocks\": %d, \"saving\": %.3f},\n",
      group, apart, apart ? 1.0 - double(group) / double(apart) : 0.0);
}

// The same comparison over a mixed-length load: 6 random prompts of
// --mixed-min..--mixed-max tokens (default 32..640), each once as an n = 4 group and once as 4 independent requests
// (all requests of a case run concurrently on one fresh engine).
void parallel_mixed_row(const Args& a) {
  std::mt19937 rng(13);
  std::vector<GenerateRequest> groups, independent;
  int64_t prompt_tokens = 0, bound = 0;
  const int bs = a.block_size;
  for (int p = 0; p < 6; ++p) {
    GenerateRequest r;
    const int len = a.mixed_min + int(rng() % uint32_t(a.mixed_max - a.mixed_min + 1));
    for (int k = 0; k < len; ++k) r.prompt_ids.push_back(int32_t(100 + rng() % 20000));
    prompt_tokens += len;
    // The fewest blocks any paged layout can hold at the end: the prompt's
    // full blocks shared, and per sample its own partly filled prompt block
    // (written by its first token) plus its output.
    bound += len / bs + 4 * ((len % bs + a.mixed_tokens + bs - 1) / bs);
    r.sampling.temperature = 0.8f;
    r.sampling.max_tokens = a.mixed_tokens;
    r.sampling.ignore_eos = true;
    r.sampling.seed = 1000 + uint64_t(p);
    for (int i = 0; i < 4; ++i) {
      independent.push_back(r);
      independent.back().sampling.seed = r.sampling.seed_for(i);
    }
    r.sampling.n = 4;
    groups.push_back(std::move(r));
  }
  const int32_t group = peak_blocks(a, groups);
  const int32_t apart = peak_blocks(a, independent);
  std::printf(
      "  \"parallel_mixed\": {\"prompts\": 6, \"prompt_tokens\": %lld, \"max_tokens\": %d, "
      "\"prefix_caching\": false, \"n4_peak_blocks\": %d, \"n4_lower_bound_blocks\": %lld, "
      "\"independent4_peak_blocks\": %d, \"ratio\": %.3f, \"bound_ratio\": %.3f},\n",
      (long long)prompt_tokens, a.mixed_tokens, group, (long long)bound, apart, apart ? double(group) / double(apart) : 0.0,
      apart ? double(bound) / double(apart) : 0.0);
}

void beam_row(const Args& a) {
  GenerateRequest r;
  std::mt19937 rng(7);
  for (int k = 0; k < 256; ++k) r.prompt_ids.push_back(int32_t(100 + rng() % 20000));
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 64;
  r.sampling.ignore_eos = true;
  r.sampling.seed = 99;
  std::vector<GenerateRequest> independent(4, r);
  r.sampling.beam_width = 4;
  r.sampling.n = 4;
  const int32_t beams = peak_blocks(a, {r});
  const int32_t apart = peak_blocks(a, independent);
  std::printf(
      "  \"beam\": {\"prompt_tokens\": 256, \"max_tokens\": 64, \"prefix_caching\": false, "
      "\"beam4_peak_blocks\": %d, \"independent4_peak_blocks\": %d, \"ratio\": %.3f},\n",
      beams, apart, apart ? double(beams) / double(apart) : 0.0);
}

// Returns the contiguous engine's peak concurrent sequences after `steps` steps.
int32_t contiguous_peak(const Args& a, int32_t max_model_len, int32_t* blocks_per_seq) {
  EngineOptions o = base(a);
  o.kv_layout = KvLayout::contiguous;
  o.max_model_len = max_model_len;
  *blocks_per_seq = (max_model_len + a.block_size - 1) / a.block_size;
  auto e = start(o);
  class Drop : public RequestSink {
   public:
    explicit Drop(std::atomic<int>* ended) : ended_(ended) {}
    bool on_token(const TokenDelta&) override { return true; }
    void on_done(const RequestDone&) override { ++*ended_; }
    void on_error(const std::string&) override { ++*ended_; }

   private:
    std::atomic<int>* ended_;
  };
  std::atomic<int> ended{0};
  for (GenerateRequest& r : make_load(a.prompts)) e->submit(std::move(r), std::make_shared<Drop>(&ended));
  while (e->stats().steps < uint64_t(a.steps) && ended.load() < a.prompts) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return e->stats().peak_running_seqs;  // ~Engine cancels the rest
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::printf("{\n  \"model\": \"%s\", \"backend\": \"cpu\", \"precision\": \"quantized\", "
              "\"block_size\": %d, \"max_num_seqs\": 64, \"max_num_batched_tokens\": 512,\n",
              a.model.c_str(), a.block_size);
  if (a.row("load")) load_row(a);
  std::fflush(stdout);
  if (a.row("parallel")) parallel_row(a);
  if (a.row("parallel_mixed")) parallel_mixed_row(a);
  std::fflush(stdout);
  if (a.row("beam")) beam_row(a);
  std::fflush(stdout);
  std::printf("  \"contiguous\": [");
  for (size_t i = 0; i < a.contiguous_lens.size() && a.row("contiguous"); ++i) {
    int32_t per_seq = 0;
    const int32_t peak = contiguous_peak(a, a.contiguous_lens[i], &per_seq);
    // Admission keeps the BlockManager's watermark (1% of the blocks, floored) free.
    const int32_t usable = a.kv_blocks - a.kv_blocks / 100;
    std::printf("%s{\"max_model_len\": %d, \"kv_blocks\": %d, \"blocks_per_seq\": %d, "
                "\"bound_after_watermark\": %d, \"peak_running_seqs\": %d, \"after_steps\": %d}",
                i ? ", " : "", a.contiguous_lens[i], a.kv_blocks, per_seq, usable / per_seq, peak,
                a.steps);
    std::fflush(stdout);
  }
  std::printf("]\n}\n");
  return 0;
}
