// `pagoda chat-template MODEL`: renders the chat read from stdin with the
// model's chat template (or --template FILE, with the model's special tokens).
// stdin holds a JSON list of messages, or an object {"messages": [...],
// "tools": [...], other keys passed to the template as extra variables}.
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "model/chat_template.hpp"
#include "model/model_text.hpp"
#include "net/cli.hpp"

namespace pagoda::net {
namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open");
  std::ostringstream body;
  body << in.rdbuf();
  return body.str();
}

// Fills messages/tools/extra_context of `input` from the stdin document.
Result<void> read_chat(const std::string& json, model::ChatRenderInput& input) {
  Result<model::jinja::Value> doc = model::parse_json(json);
  if (!doc) return make_error("stdin: " + doc.error().message);
  if (doc->is_list()) {
    input.messages = *doc;
    return {};
  }
  if (!doc->is_dict()) return make_error("stdin: expected a JSON list of messages or an object");
  model::jinja::Dict extra;
  for (const auto& [key, value] : doc->dict().entries()) {
    std::string name = key.is_string() ? key.str() : std::string();
    if (name == "messages") input.messages = value;
    else if (name == "tools") input.tools = value;
    else extra.set(key, value);
  }
  if (!input.messages.is_list()) return make_error("stdin: \"messages\" must be a list");
  input.extra_context = model::jinja::Value::dict(std::move(extra));
  return {};
}

Result<std::string> render(const std::string& model_path, const std::string& template_file,
                           bool generation_prompt) {
  Result<model::ModelText> text = model::load_model_text(model_path);
  if (!text) return text.error();
  std::string source = text->chat_template;
  if (!template_file.empty()) {
    Result<std::string> file = read_file(template_file);
    if (!file) return file.error();
    source = *file;
  }
  if (source.empty()) return make_error(model_path + ": the model has no chat template (use --template)");
  Result<model::ChatTemplate> tmpl = model::ChatTemplate::compile(source);
  if (!tmpl) return tmpl.error();
  model::ChatRenderInput input;
  input.add_generation_prompt = generation_prompt;
  input.bos_token = text->bos_token;
  input.eos_token = text->eos_token;
  std::string json((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (Result<void> r = read_chat(json, input); !r) return r.error();
  return tmpl->render(input);
}

}  // namespace

void add_chat_template_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("chat-template", "Render the chat read from stdin as a prompt");
  auto model = std::make_shared<std::string>();
  auto template_file = std::make_shared<std::string>();
  auto no_gen = std::make_shared<bool>(false);
  cmd->add_option("model", *model, "A .gguf file or a HuggingFace model directory")->required();
  cmd->add_option("--template", *template_file, "A Jinja template file to use instead");
  cmd->add_flag("--no-generation-prompt", *no_gen, "Do not add the assistant prompt");
  cmd->callback([=, &exit_code] {
    Result<std::string> out = render(*model, *template_file, !*no_gen);
    if (!out) {
      std::cerr << "pagoda chat-template: " << out.error().message << "\n";
      exit_code = 1;
      return;
    }
    std::cout << *out;
  });
}

}  // namespace pagoda::net
