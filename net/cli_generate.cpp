// `pagoda generate MODEL --prompt TEXT`: one request through the model, for
// checking outputs against references and for quick use. Until the engine
// lands it runs model::SimpleGenerator (one sequence, sequential KV blocks).
// Without --json the text streams to stdout as it is generated; with --json
// one object is printed at the end: prompt and output ids, text, finish
// reason, usage and timing.
#include <iostream>
#include <sstream>

#include "gpu/backend.hpp"
#include "model/chat_template.hpp"
#include "model/incremental_decoder.hpp"
#include "model/llama_model.hpp"
#include "model/model_inspect.hpp"
#include "model/model_text.hpp"
#include "model/simple_generator.hpp"
#include "net/cli.hpp"

namespace pagoda::net {
namespace {

struct GenerateArgs {
  std::string model, prompt, precision = "exact", backend = "auto";
  int max_tokens = 128;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int top_k = 0;
  uint64_t seed = 0;
  bool chat = false, ignore_eos = false, json = false;
};

std::string ids_json(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << ']';
  return out.str();
}

// The prompt's token ids: raw text, or (--chat) one user message rendered
// with the model's chat template and tokenized without adding BOS again.
Result<std::vector<int32_t>> prompt_ids(const GenerateArgs& a, const model::ModelText& text) {
  if (!a.chat) return text.tokenizer->encode(a.prompt, true);
  if (text.chat_template.empty()) return make_error(a.model + ": the model has no chat template");
  Result<model::ChatTemplate> tmpl = model::ChatTemplate::compile(text.chat_template);
  if (!tmpl) return tmpl.error();
  model::jinja::Dict message;
  message.set(model::jinja::Value::string("role"), model::jinja::Value::string("user"));
  message.set(model::jinja::Value::string("content"), model::jinja::Value::string(a.prompt));
  model::ChatRenderInput input;
  input.messages = model::jinja::Value::list({model::jinja::Value::dict(std::move(message))});
  input.bos_token = text.bos_token;
  input.eos_token = text.eos_token;
  Result<std::string> rendered = tmpl->render(input);
  if (!rendered) return rendered.error();
  return text.tokenizer->encode(*rendered, false);
}

Result<gpu::BackendKind> backend_kind(const std::string& name) {
  if (name == "auto") return gpu::BackendKind::kAuto;
  if (name == "cpu") return gpu::BackendKind::kCpu;
  if (name == "cuda") return gpu::BackendKind::kCuda;
  return make_error("--backend must be auto, cpu or cuda (got '" + name + "')");
}

void print_json(const GenerateArgs& a, const std::vector<int32_t>& prompt,
                const model::GenerateResult& r, const model::Tokenizer& tok) {
  std::cout << "{\"model\": " << model::json_quote(a.model)
            << ", \"prompt_ids\": " << ids_json(prompt)
            << ", \"token_ids\": " << ids_json(r.tokens)
            << ", \"text\": " << model::json_quote(tok.decode(r.tokens))
            << ", \"finish_reason\": \"" << model::finish_reason_name(r.finish) << "\""
            << ", \"usage\": {\"prompt_tokens\": " << prompt.size()
            << ", \"completion_tokens\": " << r.tokens.size() << "}"
            << ", \"timing\": {\"prefill_seconds\": " << r.prefill_seconds
            << ", \"decode_seconds\": " << r.decode_seconds
            << ", \"decode_tokens_per_second\": " << r.decode_tokens_per_second() << "}}\n";
}

Result<void> run_generate(const GenerateArgs& a) {
  Result<gpu::BackendKind> kind = backend_kind(a.backend);
  if (!kind) return kind.error();
  Result<model::ModelText> text = model::load_model_text(a.model);
  if (!text) return text.error();
  Result<std::vector<int32_t>> prompt = prompt_ids(a, *text);
  if (!prompt) return prompt.error();
  Result<std::unique_ptr<gpu::Backend>> backend = gpu::make_backend(*kind);
  if (!backend) return backend.error();
  model::LoadOptions load;
  load.precision = a.precision == "quantized" ? model::WeightPrecision::kQuantized
                                              : model::WeightPrecision::kExact;
  load.max_num_seqs = 1;
  Result<std::unique_ptr<model::LlamaModel>> llm = model::LlamaModel::load(a.model, **backend, load);
  if (!llm) return llm.error();
  model::GenerateOptions opts;
  opts.max_new_tokens = a.max_tokens;
  opts.ignore_eos = a.ignore_eos;
  opts.sampling = gpu::SamplingRowParams{.temperature = a.temperature, .top_k = a.top_k,
                                         .top_p = a.top_p, .min_p = a.min_p, .seed = a.seed};
  model::IncrementalDecoder stream(text->tokenizer);
  if (!a.json) {
    opts.on_token = [&stream](int32_t id) {
      std::cout << stream.push(id) << std::flush;
      return true;
    };
  }
  model::SimpleGenerator gen(**llm);
  Result<model::GenerateResult> r = gen.generate(*prompt, opts);
  if (!r) return r.error();
  if (a.json) print_json(a, *prompt, *r, *text->tokenizer);
  else std::cout << stream.finish() << "\n";
  return {};
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Generate a completion of one prompt");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("model", a->model, "A .gguf file or a HuggingFace model directory")->required();
  cmd->add_option("--prompt", a->prompt, "The prompt text")->required();
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens to generate at most")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", a->temperature, "0 = greedy");
  cmd->add_option("--top-k", a->top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", a->top_p, "Nucleus sampling mass (1 = off)");
  cmd->add_option("--min-p", a->min_p, "Minimum probability relative to the best (0 = off)");
  cmd->add_option("--seed", a->seed, "Sampling seed");
  cmd->add_option("--precision", a->precision, "exact: fp32 weights (matches HF); quantized: "
                  "GGUF blocks with int8 activations (faster)")->check(CLI::IsMember({"exact", "quantized"}));
  cmd->add_option("--backend", a->backend, "auto, cpu or cuda");
  cmd->add_flag("--chat", a->chat, "Wrap the prompt as one user message in the chat template");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at the end-of-sequence token");
  cmd->add_flag("--json", a->json, "Print one JSON object with ids, text, usage and timing");
  cmd->callback([a, &exit_code] {
    if (Result<void> r = run_generate(*a); !r) {
      std::cerr << "pagoda generate: " << r.error().message << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace pagoda::net
