// bench_engine: the engine on the real model (CPU backend, quantized weights)
// under a deterministic mixed-length synthetic load; prints one JSON object.
//
//   bench_engine [--model PATH] [--prompts 48] [--kv-blocks 1024] [--block-size 16]
//                [--contiguous-lens 8192,2048] [--steps 40]
//                [--rows load,parallel,parallel_mixed,contiguous,beam,streams]
//                [--backend cpu|cuda|auto] [--load-format auto|dummy] [--dummy-dtype D]
//                [--streams 1,16,64,256] [--stream-prompt 128] [--stream-tokens 128]
//                [--stream-warmup 0]
//                [--cuda-graphs on|off] [--cuda-split-k N] [--cuda-prefill-kernel fa2|rowwise]
//                [--no-async-uploads]   (the CUDA step features, as for serve/generate)
//                [--no-async-scheduling]  (lockstep: plan step N+1 only after step N
//                                          answered, as serve's --no-async-scheduling)
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
//   streams     : (not in the default rows) per count C of --streams, C
//                 requests (--stream-prompt random ids, --stream-tokens new
//                 tokens, greedy, ignore_eos) submitted at once to a fresh
//                 engine (one for all C; max_num_seqs = max C; --kv-blocks
//                 must hold them all): output tok/s, and from the
//                 client side TTFT, TPOT (per request (last - first) / (n - 1))
//                 and ITL p50/p99. --stream-warmup N first runs the same count
//                 untimed with N new tokens (warmup_s in the JSON), so the
//                 timed run is steady state. With --load-format dummy, --model is a
//                 config.json directory (model/configs/llama-3-8b).
#include <algorithm>
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
  std::string backend = "cpu", load_format = "auto", dummy_dtype = "auto";
  std::vector<int32_t> streams = {1, 16, 64, 256};
  int32_t stream_prompt = 128, stream_tokens = 128, stream_warmup = 0;
  bool cuda_graphs = true, cuda_tiled_prefill = true, async_uploads = true;
  bool async_scheduling = true;
  int32_t cuda_split_k = 512;
  bool row(const std::string& name) const { return ("," + rows + ",").find("," + name + ",") != std::string::npos; }
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
  for (int i = 1; i < argc; i += 2) {
    if (std::string(argv[i]) == "--no-async-uploads") {  // the flags without a value
      a.async_uploads = false;
      --i;
      continue;
    }
    if (std::string(argv[i]) == "--no-async-scheduling") {
      a.async_scheduling = false;
      --i;
      continue;
    }
    if (i + 1 >= argc) break;
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model = v;
    else if (k == "--cuda-graphs") a.cuda_graphs = v != "off";
    else if (k == "--cuda-split-k") a.cuda_split_k = std::stoi(v);
    else if (k == "--cuda-prefill-kernel") a.cuda_tiled_prefill = v != "rowwise";
    else if (k == "--prompts") a.prompts = std::stoi(v);
    else if (k == "--kv-blocks") a.kv_blocks = std::stoi(v);
    else if (k == "--block-size") a.block_size = std::stoi(v);
    else if (k == "--steps") a.steps = std::stoi(v);
    else if (k == "--rows") a.rows = v;
    else if (k == "--mixed-min") a.mixed_min = std::stoi(v);
    else if (k == "--mixed-max") a.mixed_max = std::stoi(v);
    else if (k == "--mixed-tokens") a.mixed_tokens = std::stoi(v);
    else if (k == "--backend") a.backend = v;
    else if (k == "--load-format") a.load_format = v;
    else if (k == "--dummy-dtype") a.dummy_dtype = v;
    else if (k == "--stream-prompt") a.stream_prompt = std::stoi(v);
    else if (k == "--stream-tokens") a.stream_tokens = std::stoi(v);
    else if (k == "--stream-warmup") a.stream_warmup = std::stoi(v);
    else if (k == "--streams") a.streams = int_list(v);
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
  o.backend = a.backend == "cuda"   ? pagoda::gpu::BackendKind::kCuda
              : a.backend == "auto" ? pagoda::gpu::BackendKind::kAuto
                                    : pagoda::gpu::BackendKind::kCpu;
  const auto format = pagoda::model::parse_load_format(a.load_format);
  const auto dtype = pagoda::model::parse_dummy_dtype(a.dummy_dtype);
  if (!format || !dtype) {
    std::fprintf(stderr, "bench_engine: bad --load-format or --dummy-dtype\n");
    std::exit(2);
  }
  o.load_format = *format;
  o.dummy_dtype = *dtype;
  o.precision = pagoda::model::WeightPrecision::kQuantized;
  o.num_blocks = a.kv_blocks;
  o.block_size = a.block_size;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 512;
  o.max_model_len = 8192;
  o.cuda_graphs = a.cuda_graphs;
  o.cuda_split_k = a.cuda_split_k;
  o.cuda_tiled_prefill = a.cuda_tiled_prefill;
  o.async_uploads = a.async_uploads;
  o.async_scheduling = a.async_scheduling;
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

// Client-side timing of one request: submit time and each token's arrival.
class TimingSink : public RequestSink {
 public:
  explicit TimingSink(std::atomic<int>* ended) : ended_(ended), t0_(std::chrono::steady_clock::now()) {}
  bool on_token(const TokenDelta&) override {
    times_.push_back(seconds_since(t0_));
    return true;
  }
  void on_done(const RequestDone&) override { ++*ended_; }
  void on_error(const std::string&) override { ++*ended_; errors_ = 1; }
  const std::vector<double>& times() const { return times_; }  // read after ended
  int errors() const { return errors_; }

 private:
  std::atomic<int>* ended_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<double> times_;
  int errors_ = 0;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1) + 0.5)];
}

// `count` greedy requests (prompts of random ids from `seed`, `tokens` new
// tokens each) submitted at once; returns when all ended (counted in *ended,
// which must outlive the sinks), with the wall time.
std::vector<std::shared_ptr<TimingSink>> run_streams(Engine* e, const Args& a, int32_t count,
                                                     int32_t tokens, uint32_t seed,
                                                     std::atomic<int>* ended, double* wall) {
  std::mt19937 rng(seed);
  std::vector<std::shared_ptr<TimingSink>> sinks;
  const auto t0 = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < count; ++i) {
    GenerateRequest r;
    for (int k = 0; k < a.stream_prompt; ++k) r.prompt_ids.push_back(int32_t(100 + rng() % 20000));
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = tokens;
    r.sampling.ignore_eos = true;
    sinks.push_back(std::make_shared<TimingSink>(ended));
    e->submit(std::move(r), sinks.back());
  }
  while (ended->load() < count) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  *wall = seconds_since(t0);
  return sinks;
}

void stream_case(Engine* e, const Args& a, int32_t count, bool last) {
  // Warm-up (--stream-warmup N): the same count once with N new tokens and
  // other prompts (no prefix hits), untimed: lazy module loading, CUDA graph
  // capture of the buckets this count passes through.
  std::atomic<int> warm_ended{0}, ended{0};
  double warm_s = 0.0;
  if (a.stream_warmup > 0) {
    run_streams(e, a, count, a.stream_warmup, uint32_t(count) + 1000003u, &warm_ended, &warm_s);
  }
  double wall = 0.0;
  const auto sinks = run_streams(e, a, count, a.stream_tokens, uint32_t(count), &ended, &wall);
  std::vector<double> ttft, tpot, itl;
  size_t tokens = 0;
  int errors = 0;
  for (const auto& s : sinks) {
    const std::vector<double>& t = s->times();
    errors += s->errors();
    tokens += t.size();
    if (t.empty()) continue;
    ttft.push_back(t[0]);
    if (t.size() > 1) tpot.push_back((t.back() - t[0]) / double(t.size() - 1));
    for (size_t i = 1; i < t.size(); ++i) itl.push_back(t[i] - t[i - 1]);
  }
  std::printf("{\"warmup_tokens\": %d, \"warmup_s\": %.3f, ", a.stream_warmup, warm_s);
  std::printf("\"streams\": %d, \"errors\": %d, \"output_tokens\": %zu, \"wall_s\": %.3f, "
              "\"output_tokens_per_s\": %.1f, \"ttft_p50_s\": %.4f, \"ttft_p99_s\": %.4f, "
              "\"tpot_mean_s\": %.5f, \"itl_p50_s\": %.5f, \"itl_p99_s\": %.5f}%s",
              count, errors, tokens, wall, double(tokens) / wall, percentile(ttft, 0.5),
              percentile(ttft, 0.99),
              tpot.empty() ? 0.0 : [&] { double m = 0; for (double x : tpot) m += x; return m / double(tpot.size()); }(),
              percentile(itl, 0.5), percentile(itl, 0.99), last ? "" : ", ");
  std::fflush(stdout);
}

void streams_row(const Args& a) {
  EngineOptions o = base(a);  // one engine (one weight load) for every count
  o.max_num_seqs = std::max(1, *std::max_element(a.streams.begin(), a.streams.end()));
  o.max_model_len = a.stream_prompt + a.stream_tokens + a.block_size;
  auto e = start(o);
  std::printf("  \"streams\": {\"prompt_tokens\": %d, \"max_tokens\": %d, \"runs\": [",
              a.stream_prompt, a.stream_tokens);
  for (size_t i = 0; i < a.streams.size(); ++i) {
    stream_case(e.get(), a, a.streams[i], i + 1 == a.streams.size());
  }
  std::printf("]},\n");
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::printf("{\n  \"model\": \"%s\", \"backend\": \"%s\", \"load_format\": \"%s\", "
              "\"dummy_dtype\": \"%s\", \"precision\": \"quantized\", "
              "\"block_size\": %d, \"max_num_seqs\": 64, \"max_num_batched_tokens\": 512,\n"
              "  \"cuda_features\": {\"graphs\": %s, \"split_k\": %d, \"prefill_kernel\": \"%s\", "
              "\"async_uploads\": %s},\n  \"async_scheduling\": %s,\n",
              a.model.c_str(), a.backend.c_str(), a.load_format.c_str(), a.dummy_dtype.c_str(),
              a.block_size, a.cuda_graphs ? "true" : "false", a.cuda_split_k,
              a.cuda_tiled_prefill ? "fa2" : "rowwise", a.async_uploads ? "true" : "false",
              a.async_scheduling ? "true" : "false");
  if (a.row("streams")) streams_row(a);
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
