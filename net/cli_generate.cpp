// `pagoda generate MODEL (--prompt TEXT | --prompts FILE.jsonl)`: the offline
// API on the command line. Every prompt goes through the actor engine
// (pagoda::Engine) concurrently, as the server's requests do. Without --json a
// single --prompt streams its text to stdout; with --json one JSON object per
// prompt is printed (in input order): prompt, prompt_ids, samples (index,
// text, token_ids, finish_reason, logprobs) and usage.
// --prompts lines are JSON strings or objects {"prompt": "..."}.
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include "actors/engine.hpp"
#include "model/chat_template.hpp"
#include "model/json_value.hpp"
#include "model/model_inspect.hpp"
#include "model/model_text.hpp"
#include "net/cli.hpp"

namespace pagoda::net {
namespace {

struct GenerateArgs {
  std::string model, prompt, prompts_file, precision = "exact", backend = "auto";
  actors::SamplingOptions sampling;
  uint64_t seed = 0;
  uint64_t kv_cache_memory = uint64_t(256) << 20;
  int max_num_seqs = 64, max_num_batched_tokens = 512;
  bool chat = false, json = false;
};

// The prompt's ids: raw text with the model's BOS rule, or (--chat) one user
// message rendered with the model's chat template (which adds its own tokens).
Result<std::vector<int32_t>> prompt_ids(const std::string& prompt, bool chat,
                                        const model::ModelText& text) {
  if (!chat) return text.tokenizer->encode(prompt, true);
  if (text.chat_template.empty()) return make_error("the model has no chat template");
  Result<model::ChatTemplate> tmpl = model::ChatTemplate::compile(text.chat_template);
  if (!tmpl) return tmpl.error();
  model::jinja::Dict message;
  message.set(model::jinja::Value::string("role"), model::jinja::Value::string("user"));
  message.set(model::jinja::Value::string("content"), model::jinja::Value::string(prompt));
  model::ChatRenderInput input;
  input.messages = model::jinja::Value::list({model::jinja::Value::dict(std::move(message))});
  input.bos_token = text.bos_token;
  input.eos_token = text.eos_token;
  Result<std::string> rendered = tmpl->render(input);
  if (!rendered) return rendered.error();
  return text.tokenizer->encode(*rendered, false);
}

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
  opts.kv_cache_bytes = a.kv_cache_memory;
  opts.max_num_seqs = a.max_num_seqs;
  opts.max_num_batched_tokens = a.max_num_batched_tokens;
  return actors::Engine::start(opts);
}

Result<void> run_generate(GenerateArgs a) {
  if (a.prompt.empty() == a.prompts_file.empty()) return make_error("give exactly one of --prompt and --prompts");
  a.sampling.seed = a.seed;
  if (Result<void> ok = a.sampling.validate(); !ok) return ok.error();
  Result<std::vector<std::string>> prompts = read_prompts(a);
  if (!prompts) return prompts.error();
  Result<model::ModelText> text = model::load_model_text(a.model);
  if (!text) return text.error();
  std::vector<actors::GenerateRequest> requests;
  for (const std::string& p : *prompts) {
    Result<std::vector<int32_t>> ids = prompt_ids(p, a.chat, *text);
    if (!ids) return make_error(a.model + ": " + ids.error().message);
    actors::GenerateRequest request;
    request.prompt_ids = std::move(*ids);
    request.sampling = a.sampling;
    requests.push_back(std::move(request));
  }
  Result<std::unique_ptr<actors::Engine>> engine = start_engine(a);
  if (!engine) return engine.error();
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
  cmd->add_option("--kv-cache-memory", a->kv_cache_memory, "KV cache budget in bytes");
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "Sequences per step at most");
  cmd->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "Tokens per step at most");
  cmd->add_flag("--chat", a->chat, "Wrap each prompt as one user message in the chat template");
  cmd->add_flag("--json", a->json, "Print one JSON object per prompt");
  cmd->callback([a, &exit_code] {
    if (Result<void> r = run_generate(*a); !r) {
      std::cerr << "pagoda generate: " << r.error().message << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace pagoda::net
