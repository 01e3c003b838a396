// Jinja lexer: template source -> tokens, with the whitespace handling of the
// environment transformers uses (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False, newlines normalized to "\n").
//
// Contract:
//  - Data tokens already have whitespace control applied: `{%-`/`{{-`/`{#-`
//    strip the whitespace before the tag, `-%}`/`-}}`/`-#}` the whitespace
//    after it; `{%+`/`+%}` disable lstrip_blocks/trim_blocks for one tag;
//    trim_blocks drops the first newline after `%}` and `#}`; lstrip_blocks
//    drops spaces/tabs between a line start and `{%`/`{#`. Comments vanish;
//    `{% raw %}...{% endraw %}` becomes data.
//  - Inside tags: names, strings (Python escapes decoded), integers (bases
//    and underscores, int64 range), floats, operators. Brackets must balance.
//  - Errors (unterminated comment/raw/string, stray characters, unbalanced
//    brackets, integer overflow) name the line.
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/result.hpp"

namespace pagoda::model::jinja {

enum class TokenType : uint8_t {
  kData, kVariableBegin, kVariableEnd, kBlockBegin, kBlockEnd,
  kName, kString, kInteger, kFloat, kOperator, kEof
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // data, name, decoded string literal, or operator
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
};

Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace pagoda::model::jinja
