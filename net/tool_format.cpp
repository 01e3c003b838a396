// Tool-call formats (net/tool_format.hpp).
#include "net/tool_format.hpp"

#include <cctype>

namespace pagoda::net {
namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether the template mentions `tools` as a whole word (a heuristic for
// "reads the variable": templates without tool support never name it).
bool reads_tools(std::string_view src) {
  for (size_t at = src.find("tools"); at != std::string_view::npos; at = src.find("tools", at + 1)) {
    const bool left = at == 0 || !ident_char(src[at - 1]);
    const bool right = at + 5 >= src.size() || !ident_char(src[at + 5]);
    if (left && right) return true;
  }
  return false;
}

}  // namespace

std::optional<ToolFormat> parse_tool_format(std::string_view name) {
  if (name == "hermes" || name == "qwen" || name == "qwen2.5" || name == "qwen3") return ToolFormat::hermes;
  if (name == "llama3_json" || name == "llama3" || name == "llama3.1") return ToolFormat::llama3_json;
  if (name == "mistral") return ToolFormat::mistral;
  return std::nullopt;
}

const char* tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::llama3_json: return "llama3_json";
    case ToolFormat::mistral: return "mistral";
    default: return "hermes";
  }
}

ToolTemplateInfo detect_tool_format(std::string_view src) {
  ToolTemplateInfo info;
  info.native = reads_tools(src);
  if (src.find("<tool_call>") != std::string_view::npos) {
    info.format = ToolFormat::hermes;
  } else if (src.find("[TOOL_CALLS]") != std::string_view::npos) {
    info.format = ToolFormat::mistral;
  } else if (src.find("<|python_tag|>") != std::string_view::npos ||
             src.find("Environment: ipython") != std::string_view::npos) {
    info.format = ToolFormat::llama3_json;
  }
  return info;
}

}  // namespace pagoda::net
