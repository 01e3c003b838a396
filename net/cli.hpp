// The `pagoda` command line: one function per subcommand, each registering its
// options on the CLI11 app and returning the callback's exit code through
// `exit_code`. Runs on the main thread; prints results on stdout and errors on
// stderr (exit code 1 for a failed command, 2 for bad usage).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/kv_cache_layout.hpp"

namespace pagoda::net {

// A JSON array of numbers, e.g. token ids or logprobs: "[1,2,3]".
template <class T>
std::string json_list(const std::vector<T>& values) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << ']';
  return out.str();
}

// --load-format auto|dummy and --dummy-dtype auto|bf16|f32|q8_0|q4_0 (names
// checked by CLI11; parse with model::parse_load_format / parse_dummy_dtype).
inline void add_load_format_options(CLI::App* cmd, std::string& load_format,
                                    std::string& dummy_dtype) {
  cmd->add_option("--load-format", load_format,
                  "auto: weights from the model files; dummy: random weights of the "
                  "config.json's shape (fixed seed)")
      ->check(CLI::IsMember({"auto", "dummy"}));
  cmd->add_option("--dummy-dtype", dummy_dtype,
                  "Dummy weights' format: auto (bf16 on CUDA, f32 on CPU), bf16, f32, q8_0, "
                  "q4_0 (q8_0/q4_0 need --precision quantized on the CPU)")
      ->check(CLI::IsMember({"auto", "bf16", "f32", "q8_0", "q4_0"}));
}

// The engine's runtime flags, shared by serve and generate:
// --no-async-scheduling (lockstep), --book-at-send, --prepare-ahead auto|on|off, --step-timeout S,
// --actor-threads N
// (request actors' pool), --shared-engine-threads (scheduler and block
// manager on that pool instead of a thread each); and the CUDA step features
// (each can be switched off if it fails): --cuda-graphs on|off,
// --cuda-split-k N (0: off), --cuda-prefill-kernel fa2|rowwise,
// --no-async-uploads; speculative decoding for requests that do not choose:
// --speculative off|ngram, --num-speculative-tokens K, --prompt-lookup-min N,
// --prompt-lookup-max N, --speculative-max-batch N; --kv-cache-dtype
// auto|f32|bf16 (auto: model::kv_dtype_for).
struct EngineRuntimeArgs {
  bool no_async_scheduling = false;
  bool book_at_send = false;
  std::string prepare_ahead = "auto";
  double step_timeout_s = 300.0;
  size_t actor_threads = 2;
  bool shared_engine_threads = false;
  std::string cuda_graphs = "on", cuda_prefill_kernel = "fa2";
  int32_t cuda_split_k = 512;
  bool no_async_uploads = false;
  std::string speculative = "off";
  int32_t num_speculative_tokens = 4, prompt_lookup_min = 1, prompt_lookup_max = 4;
  int32_t speculative_max_batch = 1;
  int32_t draft_kv_blocks = 0;  // 0: as many blocks as the target's pool
  std::string kv_cache_dtype = "auto";
};

inline void add_engine_runtime_options(CLI::App* cmd, EngineRuntimeArgs& a) {
  cmd->add_flag("--no-async-scheduling", a.no_async_scheduling,
                "Lockstep: plan the next step only after the last one's result (default: one "
                "step ahead; outputs are identical)");
  cmd->add_flag("--book-at-send", a.book_at_send,
                "One step ahead: book the next step as soon as a step is sent (default: when the "
                "step in flight has run its forward pass, so that a request arriving meanwhile "
                "joins the next step)");
  cmd->add_option("--prepare-ahead", a.prepare_ahead,
                  "The executor prepares the next step while a step's forward pass and sampling "
                  "run on its step thread (on), or runs each step whole on its thread (off); auto: "
                  "on with CUDA, off on the CPU")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--step-timeout", a.step_timeout_s,
                  "Seconds a step may take before its requests end with an error (0: no limit)");
  cmd->add_option("--actor-threads", a.actor_threads, "Threads for the request actors");
  cmd->add_flag("--shared-engine-threads", a.shared_engine_threads,
                "Run the scheduler and block-manager actors on the request actors' threads "
                "(default: a thread each)");
  cmd->add_option("--cuda-graphs", a.cuda_graphs,
                  "CUDA: replay decode steps from CUDA graphs per batch-size bucket")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--cuda-split-k", a.cuda_split_k,
                  "CUDA: split-K paged-decode partition in tokens (0: never split)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--cuda-prefill-kernel", a.cuda_prefill_kernel,
                  "CUDA: attention for long prompts: fa2 (tiled, tensor cores) or rowwise "
                  "(one CTA per query row)")
      ->check(CLI::IsMember({"fa2", "rowwise"}));
  cmd->add_flag("--no-async-uploads", a.no_async_uploads,
                "CUDA: synchronous metadata uploads instead of cudaMemcpyAsync from pinned memory");
  cmd->add_option("--kv-cache-dtype", a.kv_cache_dtype,
                  "KV cache element type: auto (CUDA: bf16; CPU: bf16 with --precision quantized, "
                  "f32 with exact), f32 or bf16")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}));
  cmd->add_option("--speculative", a.speculative,
                  "Speculative decoding for requests that do not choose: off, ngram (prompt "
                  "lookup) or draft:MODEL (a smaller model with the same tokenizer; requests may "
                  "then also choose \"draft\"); n = 1 without penalties or beams; outputs are "
                  "identical")
      ->check([](const std::string& v) {
        if (v == "off" || v == "ngram") return std::string();
        if (v.rfind("draft:", 0) == 0 && v.size() > 6) return std::string();
        return std::string("must be off, ngram or draft:MODEL");
      });
  cmd->add_option("--draft-kv-blocks", a.draft_kv_blocks,
                  "KV blocks of the draft model's own pool (0: as many as the target's)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--num-speculative-tokens", a.num_speculative_tokens, "Drafted tokens per step")
      ->check(CLI::Range(1, 32));
  cmd->add_option("--prompt-lookup-min", a.prompt_lookup_min, "Shortest n-gram matched (ngram)")
      ->check(CLI::Range(1, 16));
  cmd->add_option("--prompt-lookup-max", a.prompt_lookup_max, "Longest n-gram matched (ngram)")
      ->check(CLI::Range(1, 16));
  cmd->add_option("--speculative-max-batch", a.speculative_max_batch,
                  "No drafting in a step with more running sequences than this")
      ->check(CLI::Range(0, 1 << 16));
}

template <class EngineOptions>
void apply_engine_runtime_options(const EngineRuntimeArgs& a, EngineOptions& o) {
  o.async_scheduling = !a.no_async_scheduling;
  o.book_on_progress = !a.book_at_send;
  if (a.prepare_ahead != "auto") o.prepare_ahead = a.prepare_ahead == "on";
  o.step_timeout_s = a.step_timeout_s;
  o.actor_threads = a.actor_threads;
  o.dedicated_engine_threads = !a.shared_engine_threads;
  o.cuda_graphs = a.cuda_graphs == "on";
  o.cuda_split_k = a.cuda_split_k;
  o.cuda_tiled_prefill = a.cuda_prefill_kernel == "fa2";
  o.async_uploads = !a.no_async_uploads;
  o.speculative.ngram = a.speculative == "ngram";
  o.speculative.draft = a.speculative.rfind("draft:", 0) == 0;
  if (o.speculative.draft) o.draft_model_path = a.speculative.substr(6);
  o.draft_num_blocks = a.draft_kv_blocks;
  o.speculative.config.k = a.num_speculative_tokens;
  o.speculative.config.min_n = a.prompt_lookup_min;
  o.speculative.config.max_n = a.prompt_lookup_max;
  o.speculative_max_batch = a.speculative_max_batch;
  if (a.kv_cache_dtype == "f32") o.kv_dtype = gpu::KvDtype::kF32;
  if (a.kv_cache_dtype == "bf16") o.kv_dtype = gpu::KvDtype::kBF16;
}

void add_inspect_command(CLI::App& app, int& exit_code);
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_chat_template_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
// `pagoda engine MODEL --listen HOST:PORT`: an engine node (docs/scaling.md).
void add_engine_command(CLI::App& app, int& exit_code);

}  // namespace pagoda::net
