#include "model/pretokenizer.hpp"

#include <simdjson.h>

#include <string>

#include "model/unicode_tables.hpp"
#include "model/utf8.hpp"

namespace pagoda::model {
namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

using unicode::kLetterBit;
using unicode::kNumberBit;
using unicode::kNumericBit;
using unicode::kSpaceBit;

// One character of the input: its code point, byte length and class mask
// (0 for an ill-formed byte).
struct Ch {
  char32_t cp;
  uint32_t len;
  uint8_t cls;
};

inline Ch char_at(const char* s, uint32_t i, uint32_t end) {
  const uint8_t b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) return {b, 1, unicode::classify(b)};
  const utf8::Decoded d = utf8::decode(s + i, s + end);
  return {d.cp, d.len, d.valid ? unicode::classify(d.cp) : uint8_t{0}};
}

inline bool is_other(uint8_t cls) { return (cls & (kLetterBit | kNumberBit | kSpaceBit)) == 0; }

// Advances i over characters whose class satisfies pred.
template <class Pred>
inline uint32_t run_while(const char* s, uint32_t i, uint32_t end, Pred pred) {
  while (i < end) {
    const Ch c = char_at(s, i, end);
    if (!pred(c.cls)) break;
    i += c.len;
  }
  return i;
}

inline bool has_letter(uint8_t cls) { return cls & kLetterBit; }
inline bool has_number(uint8_t cls) { return cls & kNumberBit; }

// Length in bytes of the contraction suffix at s[i..] ("s", "re", ...), 0 if
// none. With fold, letters match case-insensitively under Unicode simple case
// folding (so 'S' and U+017F LONG S match 's'), as (?i:...) does in Oniguruma.
uint32_t contraction(const char* s, uint32_t i, uint32_t end, bool fold) {
  auto letter = [&](uint32_t at, char want, uint32_t& len) {
    if (at >= end) return false;
    const char c = s[at];
    len = 1;
    if (c == want) return true;
    if (!fold) return false;
    if (c == want - 'a' + 'A') return true;
    // U+017F LATIN SMALL LETTER LONG S folds to 's'.
    if (want == 's' && at + 1 < end && static_cast<uint8_t>(c) == 0xC5 &&
        static_cast<uint8_t>(s[at + 1]) == 0xBF) {
      len = 2;
      return true;
    }
    return false;
  };
  uint32_t l1 = 0, l2 = 0;
  for (char single : {'s', 't'}) {
    if (letter(i, single, l1)) return l1;
  }
  for (const char* two : {"re", "ve"}) {
    if (letter(i, two[0], l1) && letter(i + l1, two[1], l2)) return l1 + l2;
  }
  if (letter(i, 'm', l1)) return l1;
  if (letter(i, 'l', l1) && letter(i + l1, 'l', l2)) return l1 + l2;
  if (letter(i, 'd', l1)) return l1;
  return 0;
}

// The whitespace tail shared by the patterns: `\s+(?!\S)|\s+` (GPT-2) or
// `\s*[\r\n]+|\s+(?!\S)|\s+` (crlf). s[i] is whitespace.
uint32_t match_space(const char* s, uint32_t i, uint32_t end, bool crlf) {
  uint32_t k = i, last_start = i, nchars = 0, crlf_end = 0;
  while (k < end) {
    const Ch c = char_at(s, k, end);
    if (!(c.cls & kSpaceBit)) break;
    if (c.cp == '\r' || c.cp == '\n') crlf_end = k + 1;
    last_start = k;
    k += c.len;
    ++nchars;
  }
  if (crlf && crlf_end != 0) return crlf_end;  // \s*[\r\n]+ backtracks to the last CR/LF
  if (k == end || nchars < 2) return k;       // \s+(?!\S) whole run, or \s+
  return last_start;                           // \s+(?!\S) leaves the last space
}

uint32_t match_gpt2(const char* s, uint32_t i, uint32_t end) {
  const Ch c = char_at(s, i, end);
  if (c.cp == '\'') {
    if (uint32_t n = contraction(s, i + 1, end, false)) return i + 1 + n;
  }
  uint32_t j = i;
  Ch d = c;
  if (c.cp == ' ' && i + 1 < end) {
    j = i + 1;
    d = char_at(s, j, end);
  }
  if (d.cls & kLetterBit) return run_while(s, j + d.len, end, has_letter);
  if (d.cls & kNumberBit) return run_while(s, j + d.len, end, has_number);
  if (is_other(d.cls)) return run_while(s, j + d.len, end, is_other);
  return match_space(s, i, end, false);
}

uint32_t match_llama3(const char* s, uint32_t i, uint32_t end, uint32_t max_digits) {
  const Ch c = char_at(s, i, end);
  if (c.cp == '\'') {
    if (uint32_t n = contraction(s, i + 1, end, true)) return i + 1 + n;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls & kLetterBit) return run_while(s, i + c.len, end, has_letter);
  if (!(c.cls & kNumberBit) && c.cp != '\r' && c.cp != '\n' && i + c.len < end) {
    const Ch d = char_at(s, i + c.len, end);
    if (d.cls & kLetterBit) return run_while(s, i + c.len + d.len, end, has_letter);
  }
  // \p{N}{1,max_digits}
  if (c.cls & kNumberBit) {
    uint32_t k = i + c.len;
    for (uint32_t n = 1; n < max_digits && k < end; ++n) {
      const Ch d = char_at(s, k, end);
      if (!(d.cls & kNumberBit)) break;
      k += d.len;
    }
    return k;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  uint32_t j = i;
  Ch d = c;
  if (c.cp == ' ' && i + 1 < end) {
    j = i + 1;
    d = char_at(s, j, end);
  }
  if (is_other(d.cls)) {
    uint32_t k = run_while(s, j + d.len, end, is_other);
    while (k < end && (s[k] == '\r' || s[k] == '\n')) ++k;
    return k;
  }
  return match_space(s, i, end, true);
}

}  // namespace

std::string_view split_pattern_regex(SplitPattern p) {
  switch (p) {
    case SplitPattern::kGpt2: return kGpt2Regex;
    case SplitPattern::kLlama3: return kLlama3Regex;
    case SplitPattern::kQwen2: return kQwen2Regex;
  }
  return {};
}

std::optional<SplitPattern> recognise_split_regex(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    if (regex == split_pattern_regex(p)) return p;
  }
  return std::nullopt;
}

void split_by_pattern(SplitPattern p, std::string_view text, uint32_t begin, uint32_t end,
                      std::vector<Span>& out) {
  const char* s = text.data();
  uint32_t i = begin;
  while (i < end) {
    uint32_t k = 0;
    switch (p) {
      case SplitPattern::kGpt2: k = match_gpt2(s, i, end); break;
      case SplitPattern::kLlama3: k = match_llama3(s, i, end, 3); break;
      case SplitPattern::kQwen2: k = match_llama3(s, i, end, 1); break;
    }
    out.emplace_back(i, k);
    i = k;
  }
}

namespace {

// Digits: numeric characters isolated one by one (individual) or as runs.
void split_digits(std::string_view text, uint32_t begin, uint32_t end, bool individual,
                  std::vector<Span>& out) {
  const char* s = text.data();
  uint32_t i = begin, piece = begin;
  bool piece_numeric = false;
  while (i < end) {
    const Ch c = char_at(s, i, end);
    const bool numeric = c.cls & kNumericBit;
    if (i > piece && (numeric != piece_numeric || (numeric && individual))) {
      out.emplace_back(piece, i);
      piece = i;
    }
    piece_numeric = numeric;
    i += c.len;
  }
  if (end > piece) out.emplace_back(piece, end);
}

void apply_step(const PreTokenizer::Step& step, std::string_view text, uint32_t begin,
                uint32_t end, std::vector<Span>& out) {
  if (step.kind == PreTokenizer::Step::Kind::kSplit) {
    split_by_pattern(step.pattern, text, begin, end, out);
  } else {
    split_digits(text, begin, end, step.individual_digits, out);
  }
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<Span>& out,
                         std::vector<Span>& scratch) const {
  out.clear();
  const auto n = static_cast<uint32_t>(text.size());
  if (n == 0) return;
  if (steps_.empty()) {
    out.emplace_back(0, n);
    return;
  }
  apply_step(steps_[0], text, 0, n, out);
  for (size_t k = 1; k < steps_.size(); ++k) {
    scratch.swap(out);
    out.clear();
    for (const Span& piece : scratch) apply_step(steps_[k], text, piece.first, piece.second, out);
  }
}

namespace {

struct ParseState {
  std::vector<PreTokenizer::Step> steps;
  bool byte_level = false;  // a ByteLevel step was seen: nothing may follow it
};

Result<void> parse_byte_level(const simdjson::dom::element& json, ParseState& st) {
  bool add_prefix_space = false, use_regex = true;
  if (json["add_prefix_space"].get(add_prefix_space) != simdjson::SUCCESS) add_prefix_space = false;
  if (json["use_regex"].get(use_regex) != simdjson::SUCCESS) use_regex = true;
  if (add_prefix_space) {
    return make_error("pre_tokenizer ByteLevel with add_prefix_space=true is not supported");
  }
  if (use_regex) st.steps.push_back({PreTokenizer::Step::Kind::kSplit, SplitPattern::kGpt2, false});
  st.byte_level = true;
  return {};
}

Result<void> parse_split(const simdjson::dom::element& json, ParseState& st) {
  std::string_view regex, behavior;
  bool invert = false;
  if (json["pattern"]["Regex"].get(regex) != simdjson::SUCCESS) {
    return make_error("pre_tokenizer Split: only {\"Regex\": ...} patterns are supported");
  }
  if (json["behavior"].get(behavior) != simdjson::SUCCESS || behavior != "Isolated") {
    return make_error("pre_tokenizer Split: only behavior \"Isolated\" is supported, got \"" +
                      std::string(behavior) + "\"");
  }
  if (json["invert"].get(invert) == simdjson::SUCCESS && invert) {
    return make_error("pre_tokenizer Split: invert=true is not supported");
  }
  const std::optional<SplitPattern> p = recognise_split_regex(regex);
  if (!p) return make_error("pre_tokenizer Split: unrecognised regex: " + std::string(regex));
  st.steps.push_back({PreTokenizer::Step::Kind::kSplit, *p, false});
  return {};
}

Result<void> parse_step(const simdjson::dom::element& json, ParseState& st) {
  std::string_view type;
  if (json["type"].get(type) != simdjson::SUCCESS) {
    return make_error("pre_tokenizer without a \"type\"");
  }
  if (st.byte_level && type != "Sequence") {
    return make_error("pre_tokenizer \"" + std::string(type) +
                      "\" after ByteLevel is not supported (ByteLevel must come last)");
  }
  if (type == "ByteLevel") return parse_byte_level(json, st);
  if (type == "Split") return parse_split(json, st);
  if (type == "Digits") {
    bool individual = false;
    if (json["individual_digits"].get(individual) != simdjson::SUCCESS) individual = false;
    st.steps.push_back({PreTokenizer::Step::Kind::kDigits, SplitPattern::kGpt2, individual});
    return {};
  }
  if (type == "Sequence") {
    simdjson::dom::array items;
    if (json["pretokenizers"].get(items) != simdjson::SUCCESS) {
      return make_error("pre_tokenizer Sequence without \"pretokenizers\"");
    }
    for (simdjson::dom::element item : items) {
      Result<void> r = parse_step(item, st);
      if (!r) return r;
    }
    return {};
  }
  return make_error("unsupported pre_tokenizer type \"" + std::string(type) + "\"");
}

}  // namespace

Result<PreTokenizer> PreTokenizer::from_json(const simdjson::dom::element& json) {
  if (json.is_null()) return PreTokenizer();
  ParseState st;
  Result<void> r = parse_step(json, st);
  if (!r) return r.error();
  return PreTokenizer(std::move(st.steps), st.byte_level);
}

}  // namespace pagoda::model
