#include "model/model_text.hpp"

#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/gguf_file.hpp"
#include "model/json_file.hpp"
#include "model/model_config.hpp"
#include "model/standin_tokenizer.hpp"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

std::string token_text(const Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.vocab_size() ? std::string(tok.piece(id)) : std::string();
}

Result<ModelText> from_gguf(const std::string& path) {
  Result<GgufFile> gguf = GgufFile::open(path);
  if (!gguf) return gguf.error();
  auto tok = Tokenizer::from_gguf(*gguf);
  if (!tok) return tok.error();
  ModelText text;
  text.tokenizer = *tok;
  if (gguf->find("tokenizer.chat_template") != nullptr) {
    Result<std::string> tmpl = gguf->get_string("tokenizer.chat_template");
    if (!tmpl) return tmpl.error();
    text.chat_template = *tmpl;
  }
  text.bos_token = token_text(*text.tokenizer, text.tokenizer->bos_id());
  text.eos_token = token_text(*text.tokenizer, text.tokenizer->eos_id());
  return text;
}

// A special-token entry of tokenizer_config.json: a string or {"content": ...}.
std::string token_entry(simdjson::dom::element el) {
  std::string_view sv;
  if (el.get_string().get(sv) == simdjson::SUCCESS) return std::string(sv);
  if (el["content"].get_string().get(sv) == simdjson::SUCCESS) return std::string(sv);
  return {};
}

// chat_template of tokenizer_config.json: a string, or a list of
// {"name", "template"} of which "default" is used.
Result<std::string> config_template(simdjson::dom::element el, const std::string& file) {
  std::string_view sv;
  if (el.get_string().get(sv) == simdjson::SUCCESS) return std::string(sv);
  simdjson::dom::array list;
  if (el.get_array().get(list) != simdjson::SUCCESS) {
    return make_error(file + ": chat_template is neither a string nor a list");
  }
  for (simdjson::dom::element entry : list) {
    std::string_view name, body;
    if (entry["name"].get_string().get(name) == simdjson::SUCCESS && name == "default" &&
        entry["template"].get_string().get(body) == simdjson::SUCCESS) {
      return std::string(body);
    }
  }
  return make_error(file + ": chat_template list has no \"default\" entry");
}

Result<void> read_tokenizer_config(const fs::path& dir, ModelText& text) {
  fs::path file = dir / "tokenizer_config.json";
  if (!fs::exists(file)) return {};
  simdjson::dom::parser parser;
  auto loaded = load_json_file(file.string(), parser);  // big integers read as floats
  if (!loaded) return loaded.error();
  const simdjson::dom::element root = *loaded;
  simdjson::dom::element el;
  if (root["bos_token"].get(el) == simdjson::SUCCESS) text.bos_token = token_entry(el);
  if (root["eos_token"].get(el) == simdjson::SUCCESS) text.eos_token = token_entry(el);
  if (text.chat_template.empty() && root["chat_template"].get(el) == simdjson::SUCCESS) {
    Result<std::string> tmpl = config_template(el, file.string());
    if (!tmpl) return tmpl.error();
    text.chat_template = *tmpl;
  }
  return {};
}

// A directory with neither tokenizer.json nor tokenizer.model (a bare
// config.json for dummy weights): the byte-level stand-in, with the config's BOS/EOS.
Result<std::shared_ptr<const Tokenizer>> dir_tokenizer(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "tokenizer.json") || fs::exists(fs::path(dir) / "tokenizer.model")) {
    return Tokenizer::from_hf_dir(dir);
  }
  Result<ModelConfig> config = load_model_config(dir);
  if (!config) return make_error(dir + ": no tokenizer.json or tokenizer.model, and " + config.error().message);
  const int32_t eos = config->eos_token_ids.empty() ? -1 : config->eos_token_ids[0];
  return make_standin_tokenizer(config->bos_token_id, eos);
}

Result<ModelText> from_hf_dir(const std::string& dir) {
  auto tok = dir_tokenizer(dir);
  if (!tok) return tok.error();
  ModelText text;
  text.tokenizer = *tok;
  fs::path jinja = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    std::ostringstream body;
    body << in.rdbuf();
    text.chat_template = body.str();
  }
  if (Result<void> r = read_tokenizer_config(dir, text); !r) return r.error();
  if (text.bos_token.empty()) text.bos_token = token_text(*text.tokenizer, text.tokenizer->bos_id());
  if (text.eos_token.empty()) text.eos_token = token_text(*text.tokenizer, text.tokenizer->eos_id());
  return text;
}

}  // namespace

bool is_gguf_path(const std::string& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

Result<ModelText> load_model_text(const std::string& model_path) {
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) return from_hf_dir(model_path);
  if (fs::path(model_path).filename() == "config.json" && fs::exists(model_path, ec)) {
    const std::string dir = fs::path(model_path).parent_path().string();
    return from_hf_dir(dir.empty() ? "." : dir);
  }
  if (!fs::exists(model_path, ec)) return make_error(model_path + ": no such file or directory");
  if (!is_gguf_path(model_path)) {
    return make_error(model_path + ": not a GGUF file (bad magic) and not a model directory");
  }
  return from_gguf(model_path);
}

}  // namespace pagoda::model
