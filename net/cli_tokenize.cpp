// `pagoda tokenize MODEL`: text on stdin → JSON array of token ids on stdout.
// --jsonl: every input line is a JSON string; one JSON array per line out.
// --no-special: do not add the model's special tokens (BOS).
#include <iostream>
#include <iterator>
#include <sstream>

#include "model/json_value.hpp"
#include "model/model_text.hpp"
#include "net/cli.hpp"

namespace pagoda::net {
namespace {

// One JSON string per line; returns false (after printing why) on bad input.
bool tokenize_jsonl(const model::Tokenizer& tok, bool add_special) {
  std::string line;
  for (size_t lineno = 1; std::getline(std::cin, line); ++lineno) {
    if (line.empty()) continue;
    Result<model::jinja::Value> v = model::parse_json(line);
    if (!v || !v->is_string()) {
      std::cerr << "pagoda tokenize: stdin line " << lineno << ": "
                << (v ? std::string("not a JSON string") : v.error().message) << "\n";
      return false;
    }
    std::cout << json_list(tok.encode(v->str(), add_special)) << "\n";
  }
  return true;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of the text read from stdin");
  auto model = std::make_shared<std::string>();
  auto jsonl = std::make_shared<bool>(false);
  auto no_special = std::make_shared<bool>(false);
  cmd->add_option("model", *model, "A .gguf file or a HuggingFace model directory")->required();
  cmd->add_flag("--jsonl", *jsonl, "Each input line is a JSON string; one array per line");
  cmd->add_flag("--no-special", *no_special, "Do not add special tokens (BOS)");
  cmd->callback([=, &exit_code] {
    Result<model::ModelText> text = model::load_model_text(*model);
    if (!text) {
      std::cerr << "pagoda tokenize: " << text.error().message << "\n";
      exit_code = 1;
      return;
    }
    const model::Tokenizer& tok = *text->tokenizer;
    if (*jsonl) {
      exit_code = tokenize_jsonl(tok, !*no_special) ? 0 : 1;
      return;
    }
    std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    std::cout << json_list(tok.encode(input, !*no_special)) << "\n";
  });
}

}  // namespace pagoda::net
