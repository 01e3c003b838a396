// `pagoda generate MODEL (--prompt TEXT | --prompts FILE.jsonl)`: the offline
// API on the command line. Every prompt goes through the actor engine
// (pagoda::Engine) concurrently, as the server's requests do. Without --json a
// single --prompt streams its text to stdout; with --json one JSON object per
// prompt is printed (in input order): prompt, prompt_ids, samples (index,
// text, token_ids, finish_reason, logprobs) and usage.
// --prompts lines are JSON strings or objects {"prompt": "..."}.
// Beam search (--beam-width K): the --n best beams (default K) are the
// samples, each with "cumulative_logprob" and "score" (logprobs empty);
// without --json one line per beam: score, then its text.
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <future>
#include <iostream>
#include <mutex>
#include <sstream>

#include "actors/engine.hpp"
#include "gpu/cpu/host_memory.hpp"
#include "gpu/device.hpp"
#include "model/json_value.hpp"
#include "model/model_inspect.hpp"
#include "net/cli.hpp"

namespace pagoda::net {
namespace {

struct GenerateArgs {
  EngineRuntimeArgs runtime;
  std::string model, prompt, prompts_file, precision = "exact", backend = "auto";
  std::string load_format = "auto", dummy_dtype = "auto";
  actors::SamplingOptions sampling;
  uint64_t seed = 0;
  uint64_t kv_cache_memory = 0;  // 0: gpu::cpu::kv_cache_budget decides
  int max_num_seqs = 64, max_num_batched_tokens = 512;
  bool chat = false, json = false;
  bool n_given = false;  // --n on the command line (beam search: else n = beam width)
};

// The prompt texts: --prompt, or one per line of --prompts (JSON string or
// {"prompt": string}); blank lines are skipped.
Result<std::vector<std::string>> read_prompts(const GenerateArgs& a) {
  if (a.prompts_file.empty()) return std::vector<std::string>{a.prompt};
  std::ifstream in(a.prompts_file);
  if (!in) return make_error(a.prompts_file + ": cannot open");
  std::vector<std::string> prompts;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<model::jinja::Value> v = model::parse_json(line);
    const model::jinja::Value* p = nullptr;
    if (v && v->is_string()) p = &*v;
    else if (v && v->is_dict()) p = v->dict().find("prompt");
    if (p == nullptr || !p->is_string()) {
      return make_error(a.prompts_file + ":" + std::to_string(lineno) +
                        ": expected a JSON string or {\"prompt\": string}");
    }
    prompts.push_back(p->str());
  }
  if (prompts.empty()) return make_error(a.prompts_file + ": no prompts");
  return prompts;
}

void print_result(const std::string& prompt, const std::vector<int32_t>& ids,
                  const actors::GenerateResult& r) {
  std::cout << "{\"prompt\": " << model::json_quote(prompt) << ", \"prompt_ids\": " << json_list(ids);
  if (!r.error.empty()) {
    std::cout << ", \"error\": " << model::json_quote(r.error) << "}\n";
    return;
  }
  std::cout << ", \"samples\": [";
  size_t completion = 0;
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const actors::SampleResult& s = r.samples[i];
    completion += s.token_ids.size();
    std::cout << (i ? ", " : "") << "{\"index\": " << i << ", \"text\": " << model::json_quote(s.text)
              << ", \"token_ids\": " << json_list(s.token_ids) << ", \"finish_reason\": \""
              << actors::finish_reason_name(s.finish) << "\", \"logprobs\": " << json_list(s.logprobs)
              << "}";
  }
  std::cout << "], \"usage\": {\"prompt_tokens\": " << ids.size()
            << ", \"completion_tokens\": " << completion << "}}\n";
}

// A finite double as a JSON number (10 significant digits), else null.
std::string json_double(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream out;
  out.precision(10);
  out << v;
  return out.str();
}

// Collects one beam-search request's result (RequestDone::beams).
class BeamSink : public actors::RequestSink {
 public:
  bool on_token(const actors::TokenDelta&) override { return true; }
  void on_done(const actors::RequestDone& done) override { promise_.set_value({done, ""}); }
  void on_error(const std::string& message) override {
    promise_.set_value({{}, message.empty() ? "error" : message});
  }
  std::future<std::pair<actors::RequestDone, std::string>> future() { return promise_.get_future(); }

 private:
  std::promise<std::pair<actors::RequestDone, std::string>> promise_;
};

void print_beams(const std::string& prompt, const std::vector<int32_t>& ids,
                 const std::pair<actors::RequestDone, std::string>& r, bool json) {
  const std::vector<actors::BeamHypothesis>& beams = r.first.beams;
  if (!json) {
    if (!r.second.empty()) std::cout << "error: " << r.second << "\n";
    for (const actors::BeamHypothesis& b : beams) std::cout << "[" << b.score << "] " << b.text << "\n";
    return;
  }
  std::cout << "{\"prompt\": " << model::json_quote(prompt) << ", \"prompt_ids\": " << json_list(ids);
  if (!r.second.empty()) {
    std::cout << ", \"error\": " << model::json_quote(r.second) << "}\n";
    return;
  }
  std::cout << ", \"samples\": [";
  size_t completion = 0;
  for (size_t i = 0; i < beams.size(); ++i) {
    const actors::BeamHypothesis& b = beams[i];
    completion += b.token_ids.size();
    std::cout << (i ? ", " : "") << "{\"index\": " << i << ", \"text\": " << model::json_quote(b.text)
              << ", \"token_ids\": " << json_list(b.token_ids) << ", \"finish_reason\": \""
              << actors::finish_reason_name(b.finish) << "\", \"logprobs\": [], \"cumulative_logprob\": "
              << json_double(b.cumulative_logprob) << ", \"score\": " << json_double(b.score)
              << "}";
  }
  std::cout << "], \"usage\": {\"prompt_tokens\": " << ids.size()
            << ", \"completion_tokens\": " << completion << "}}\n";
}

// Runs every request as beam search (concurrently) and prints the beams.
void run_beams(actors::Engine& engine, std::vector<actors::GenerateRequest> requests,
               const std::vector<std::string>& prompts, bool json) {
  std::vector<std::future<std::pair<actors::RequestDone, std::string>>> futures;
  std::vector<std::vector<int32_t>> ids;
  for (actors::GenerateRequest& r : requests) {
    auto sink = std::make_shared<BeamSink>();
    futures.push_back(sink->future());
    ids.push_back(r.prompt_ids);
    engine.submit(std::move(r), sink);
  }
  for (size_t i = 0; i < futures.size(); ++i) print_beams(prompts[i], ids[i], futures[i].get(), json);
}

// Streams one request's text to stdout and waits for its end.
class StdoutSink : public actors::RequestSink {
 public:
  bool on_token(const actors::TokenDelta& d) override {
    std::cout << d.text << std::flush;
    return true;
  }
  void on_done(const actors::RequestDone&) override { finish(""); }
  void on_error(const std::string& message) override { finish(message.empty() ? "error" : message); }
  std::string wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return error_;
  }

 private:
  void finish(std::string error) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_ = true;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

Result<std::unique_ptr<actors::Engine>> start_engine(const GenerateArgs& a) {
  actors::EngineOptions opts;
  opts.model_path = a.model;
  if (a.backend == "cpu") opts.backend = gpu::BackendKind::kCpu;
  else if (a.backend == "cuda") opts.backend = gpu::BackendKind::kCuda;
  else if (a.backend != "auto") return make_error("--backend must be auto, cpu or cuda (got '" + a.backend + "')");
  opts.precision = a.precision == "quantized" ? model::WeightPrecision::kQuantized
                                              : model::WeightPrecision::kExact;
  opts.load_format = *model::parse_load_format(a.load_format);  // CLI11 checked the names
  opts.dummy_dtype = *model::parse_dummy_dtype(a.dummy_dtype);
  const bool cpu_run =
      a.backend == "cpu" || (a.backend == "auto" && gpu::probe_devices().device_count == 0);
  const gpu::cpu::KvBudget kv = gpu::cpu::kv_cache_budget(a.kv_cache_memory, cpu_run);
  opts.kv_cache_bytes = kv.bytes;
  std::cerr << "pagoda: kv cache budget " << (kv.bytes >> 20) << " MiB (" << kv.how << ")\n";
  opts.max_num_seqs = a.max_num_seqs;
  opts.max_num_batched_tokens = a.max_num_batched_tokens;
  apply_engine_runtime_options(a.runtime, opts);
  return actors::Engine::start(opts);
}

Result<void> run_generate(GenerateArgs a) {
  if (a.prompt.empty() == a.prompts_file.empty()) return make_error("give exactly one of --prompt and --prompts");
  a.sampling.seed = a.seed;
  if (a.sampling.beam_width > 0 && !a.n_given) a.sampling.n = a.sampling.beam_width;
  if (Result<void> ok = a.sampling.validate(); !ok) return ok.error();
  Result<std::vector<std::string>> prompts = read_prompts(a);
  if (!prompts) return prompts.error();
  Result<std::unique_ptr<actors::Engine>> engine = start_engine(a);
  if (!engine) return engine.error();
  // The ids the engine will run (raw text with the model's BOS rule, or with
  // --chat one user message through the chat template), printed with --json.
  std::vector<actors::GenerateRequest> requests;
  for (const std::string& p : *prompts) {
    actors::GenerateRequest request;
    if (a.chat) {
      request.messages = {{"user", p}};
    } else {
      request.prompt = p;
    }
    Result<std::vector<int32_t>> ids = (*engine)->tokenize(request);
    if (!ids) return make_error(a.model + ": " + ids.error().message);
    request = actors::GenerateRequest{};
    request.prompt_ids = std::move(*ids);
    request.sampling = a.sampling;
    requests.push_back(std::move(request));
  }
  if (a.sampling.beam_width > 0) {
    run_beams(**engine, std::move(requests), *prompts, a.json);
    return {};
  }
  if (!a.json && requests.size() == 1 && a.sampling.n == 1) {
    auto sink = std::make_shared<StdoutSink>();
    (*engine)->submit(requests[0], sink);
    std::string error = sink->wait();
    std::cout << "\n";
    return error.empty() ? Result<void>{} : Result<void>(make_error(error));
  }
  std::vector<std::vector<int32_t>> ids;
  for (const auto& r : requests) ids.push_back(r.prompt_ids);
  std::vector<actors::GenerateResult> results = (*engine)->generate(std::move(requests));
  for (size_t i = 0; i < results.size(); ++i) print_result((*prompts)[i], ids[i], results[i]);
  return {};
}

void add_sampling_options(CLI::App* cmd, GenerateArgs& a) {
  actors::SamplingOptions& s = a.sampling;
  s.max_tokens = 128;
  cmd->add_option("--max-tokens", s.max_tokens, "Tokens to generate at most per sample");
  cmd->add_option("--min-tokens", s.min_tokens, "Tokens to generate before EOS/stop may end");
  cmd->add_option("--n", s.n, "Samples per prompt (the prompt is prefilled once)");
  cmd->add_option("--temperature", s.temperature, "0 = greedy");
  cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass (1 = off)");
  cmd->add_option("--min-p", s.min_p, "Minimum probability relative to the best (0 = off)");
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "HF repetition penalty (1 = off)");
  cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty");
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty");
  cmd->add_option("--seed", a.seed, "Sampling seed");
  cmd->add_option("--stop", s.stop, "Stop string (repeatable)");
  cmd->add_option("--stop-token-id", s.stop_token_ids, "Stop token id (repeatable)");
  cmd->add_option("--logprobs", s.logprobs, "Top-N logprobs per token (0..20)");
  cmd->add_flag("--ignore-eos", s.ignore_eos, "Do not stop at the end-of-sequence token");
  cmd->add_option("--beam-width", s.beam_width, "Beam search with K beams (0 = off; at most " +
                  std::to_string(actors::SamplingOptions::kMaxBeamWidth) + ")");
  cmd->add_option("--length-penalty", s.length_penalty,
                  "Beam score = cumulative logprob / generated_length^X (default 1)");
  cmd->add_option("--early-stopping", s.early_stopping,
                  "Beam search: true stops once K beams finished; false while one could improve");
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Generate completions through the engine");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("model", a->model, "A .gguf file or a HuggingFace model directory")->required();
  cmd->add_option("--prompt", a->prompt, "One prompt");
  cmd->add_option("--prompts", a->prompts_file, "A JSONL file of prompts, run concurrently");
  add_sampling_options(cmd, *a);
  cmd->add_option("--precision", a->precision, "exact: fp32 weights (matches HF); quantized: GGUF "
                  "blocks with int8 activations (faster)")->check(CLI::IsMember({"exact", "quantized"}));
  cmd->add_option("--backend", a->backend, "auto, cpu or cuda");
  add_load_format_options(cmd, a->load_format, a->dummy_dtype);
  add_engine_runtime_options(cmd, a->runtime);
  cmd->add_option("--kv-cache-memory", a->kv_cache_memory,
                  "KV cache budget in bytes (default: 30% of available memory on the CPU)");
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "Sequences per step at most");
  cmd->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "Tokens per step at most");
  cmd->add_flag("--chat", a->chat, "Wrap each prompt as one user message in the chat template");
  cmd->add_flag("--json", a->json, "Print one JSON object per prompt");
  cmd->callback([a, cmd, &exit_code] {
    a->n_given = cmd->count("--n") > 0;
    if (Result<void> r = run_generate(*a); !r) {
      std::cerr << "pagoda generate: " << r.error().message << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace pagoda::net
