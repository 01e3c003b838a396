// Jinja lexer (see jinja_lexer.hpp). Mirrors jinja2's lexer rules: the root
// state finds the next `{{`, `{%`, `{#` (or `{% raw %}`), applies whitespace
// control to the data before it, then the tag state reads tokens until its
// end marker (only when no bracket is open).
#include "model/jinja_lexer.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>

#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c & 0x80);
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Newlines to "\n", and one trailing newline dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s.push_back(in[i]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Length of the Unicode whitespace run starting at p.
size_t ws_run(std::string_view s, size_t p) {
  size_t q = p;
  while (q < s.size()) {
    const auto b = static_cast<unsigned char>(s[q]);
    if (b < 0x80) {
      if (!pystr::is_space(b)) break;
      ++q;
      continue;
    }
    const size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    const std::u32string cp = pystr::decode(s.substr(q, n));
    if (cp.size() != 1 || !pystr::is_space(cp[0])) break;
    q += n;
  }
  return q - p;
}

bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : pystr::decode(s)) {
    if (!pystr::is_space(c)) return false;
  }
  return true;
}

// Matches `(\d+_)*\d+` at p; returns its end or npos.
size_t match_digits(std::string_view s, size_t p) {
  if (p >= s.size() || !is_digit(s[p])) return std::string_view::npos;
  size_t q = p;
  while (true) {
    while (q < s.size() && is_digit(s[q])) ++q;
    if (q + 1 < s.size() && s[q] == '_' && is_digit(s[q + 1])) { ++q; continue; }
    return q;
  }
}

// jinja2's float_re at p (not preceded by '.'); returns its end or npos.
size_t match_float(std::string_view s, size_t p) {
  if (p > 0 && s[p - 1] == '.') return std::string_view::npos;
  const size_t a = match_digits(s, p);
  if (a == std::string_view::npos) return a;
  auto exponent = [&](size_t q) -> size_t {
    if (q >= s.size() || (s[q] != 'e' && s[q] != 'E')) return std::string_view::npos;
    ++q;
    if (q < s.size() && (s[q] == '+' || s[q] == '-')) ++q;
    return match_digits(s, q);
  };
  size_t frac = std::string_view::npos;
  if (a < s.size() && s[a] == '.') frac = match_digits(s, a + 1);
  if (frac != std::string_view::npos) {
    const size_t e = exponent(frac);
    return e != std::string_view::npos ? e : frac;
  }
  return exponent(a);
}

// jinja2's integer_re at p; returns its end or npos.
size_t match_integer(std::string_view s, size_t p) {
  if (p >= s.size() || !is_digit(s[p])) return std::string_view::npos;
  auto run = [&](size_t q, auto ok) {
    const size_t start = q;
    while (q < s.size()) {
      if (ok(s[q])) { ++q; continue; }
      if (s[q] == '_' && q + 1 < s.size() && ok(s[q + 1])) { q += 2; continue; }
      break;
    }
    return q == start ? std::string_view::npos : q;
  };
  if (s[p] == '0' && p + 1 < s.size()) {
    const char b = static_cast<char>(s[p + 1] | 0x20);
    size_t r = std::string_view::npos;
    if (b == 'b') r = run(p + 2, [](char c) { return c == '0' || c == '1'; });
    if (b == 'o') r = run(p + 2, [](char c) { return c >= '0' && c <= '7'; });
    if (b == 'x') r = run(p + 2, [](char c) { return hex_value(c) >= 0; });
    if (r != std::string_view::npos) return r;
  }
  if (s[p] == '0') {
    const size_t r = run(p + 1, [](char c) { return c == '0'; });
    return r == std::string_view::npos ? p + 1 : r;
  }
  const size_t r = run(p + 1, [](char c) { return is_digit(c); });
  return r == std::string_view::npos ? p + 1 : r;
}

// The character a one-letter Python escape stands for, or -1.
int simple_escape(char e) {
  switch (e) {
    case '\\': case '\'': case '"': return e;
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'v': return '\v';
    default: return -1;
  }
}

// Decodes Python's unicode-escape of a string literal's body (as jinja2 does
// after backslash-replacing non-ASCII characters). False with `error` set on
// a malformed escape.
bool unescape(std::string_view body, std::string& out, std::string& error) {
  for (size_t k = 0; k < body.size(); ++k) {
    if (body[k] != '\\') { out.push_back(body[k]); continue; }
    const char e = body[++k];
    if (e == '\n') continue;  // line continuation
    if (const int c = simple_escape(e); c >= 0) { out.push_back(static_cast<char>(c)); continue; }
    if (e == 'x' || e == 'u' || e == 'U') {
      const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      uint32_t v = 0;
      for (size_t j = 1; j <= n; ++j) {
        const int h = k + j < body.size() ? hex_value(body[k + j]) : -1;
        if (h < 0) { error = std::string("truncated \\") + e + " escape"; return false; }
        v = v * 16 + static_cast<uint32_t>(h);
      }
      if (v > 0x10FFFF) { error = "illegal Unicode character"; return false; }
      if (v >= 0xD800 && v <= 0xDFFF) { error = "surrogate escapes are not supported"; return false; }
      pystr::append_utf8(out, v);
      k += n;
    } else if (e == 'N') {
      error = "\\N{...} escapes are not supported";
      return false;
    } else if (e >= '0' && e <= '7') {
      uint32_t v = static_cast<uint32_t>(e - '0');
      for (int j = 0; j < 2 && k + 1 < body.size() && body[k + 1] >= '0' && body[k + 1] <= '7'; ++j) {
        v = v * 8 + static_cast<uint32_t>(body[++k] - '0');
      }
      pystr::append_utf8(out, v);
    } else if (e & 0x80) {
      // The non-ASCII char was backslash-replaced first, so this backslash
      // escapes the replacement's backslash: "\é" becomes the text "\xe9".
      size_t n = 1;
      while (k + n < body.size() && (body[k + n] & 0xC0) == 0x80) ++n;
      const char32_t cp = pystr::decode(body.substr(k, n))[0];
      char buf[16];
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                    static_cast<unsigned>(cp));
      out += buf;
      k += n - 1;
    } else {
      out.push_back('\\');
      out.push_back(e);
    }
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : s_(normalize_source(source)) {}
  Result<std::vector<Token>> run();

 private:
  enum class Tag { kVariable, kBlock, kComment, kRaw };
  Error fail(const std::string& what) const {
    return make_error("template syntax error at line " + std::to_string(line_) + ": " + what);
  }
  void advance(size_t to) {
    line_ += static_cast<int>(std::count(s_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         s_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
    pos_ = to;
  }
  void emit(TokenType t, std::string text = {}) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    tok.line = line_;
    out_.push_back(std::move(tok));
  }
  void emit_data(std::string text, char sign, bool lstrip_ok);
  std::optional<size_t> match_raw_begin(size_t p) const;
  size_t match_tag_end(size_t p, Tag tag) const;
  Result<void> lex_comment();
  Result<void> lex_raw();
  Result<void> lex_tag(Tag tag);
  Result<void> lex_token();
  Result<void> lex_string();
  Result<void> lex_number(size_t float_end, size_t int_end);

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<char> brackets_;
  std::vector<Token> out_;
};

void Lexer::emit_data(std::string text, char sign, bool lstrip_ok) {
  if (sign == '-') {
    text = pystr::strip(text, std::nullopt, false, true);
  } else if (sign != '+' && lstrip_ok) {
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) {
      text.resize(l_pos);
    }
  }
  if (!text.empty()) emit(TokenType::kData, std::move(text));
}

// `{%(-|+|)\s*raw\s*(-%}\s*|%})` at p: returns the end of the match.
std::optional<size_t> Lexer::match_raw_begin(size_t p) const {
  size_t q = p + 2;
  if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ++q;
  q += ws_run(s_, q);
  if (s_.compare(q, 3, "raw") != 0) return std::nullopt;
  q += 3;
  q += ws_run(s_, q);
  if (s_.compare(q, 3, "-%}") == 0) return q + 3 + ws_run(s_, q + 3);
  if (s_.compare(q, 2, "%}") == 0) return q + 2;
  return std::nullopt;
}

// End marker of a block/variable/comment tag at p: end of match or npos.
size_t Lexer::match_tag_end(size_t p, Tag tag) const {
  const std::string_view close = tag == Tag::kVariable ? "}}" : tag == Tag::kBlock ? "%}" : "#}";
  const std::string_view plus = tag == Tag::kBlock ? "+%}" : "+#}";
  const std::string_view minus = tag == Tag::kVariable ? "-}}" : tag == Tag::kBlock ? "-%}" : "-#}";
  if (tag != Tag::kVariable && s_.compare(p, 3, plus) == 0) return p + 3;
  if (s_.compare(p, 3, minus) == 0) return p + 3 + ws_run(s_, p + 3);
  if (s_.compare(p, 2, close) == 0) {
    size_t q = p + 2;
    if (tag != Tag::kVariable && q < s_.size() && s_[q] == '\n') ++q;  // trim_blocks
    return q;
  }
  return std::string::npos;
}

Result<std::vector<Token>> Lexer::run() {
  while (pos_ < s_.size()) {
    size_t p = pos_;
    Tag tag = Tag::kVariable;
    for (; p + 1 < s_.size(); ++p) {
      if (s_[p] != '{') continue;
      const char c = s_[p + 1];
      if (c == '{') { tag = Tag::kVariable; break; }
      if (c == '#') { tag = Tag::kComment; break; }
      if (c == '%') { tag = match_raw_begin(p) ? Tag::kRaw : Tag::kBlock; break; }
    }
    if (p + 1 >= s_.size()) {  // no more tags: the rest is data
      emit(TokenType::kData, s_.substr(pos_));
      advance(s_.size());
      break;
    }
    const char sign = p + 2 < s_.size() && (s_[p + 2] == '-' || s_[p + 2] == '+') ? s_[p + 2] : 0;
    emit_data(s_.substr(pos_, p - pos_), sign, tag != Tag::kVariable);
    advance(p);
    Result<void> r;
    if (tag == Tag::kComment) {
      advance(p + 2 + (sign ? 1 : 0));
      r = lex_comment();
    } else if (tag == Tag::kRaw) {
      const size_t end = *match_raw_begin(p);
      line_starting_ = s_[end - 1] == '\n';
      advance(end);
      r = lex_raw();
    } else {
      advance(p + 2 + (sign ? 1 : 0));
      r = lex_tag(tag);
    }
    if (!r) return r.error();
  }
  emit(TokenType::kEof);
  return std::move(out_);
}

Result<void> Lexer::lex_comment() {
  for (size_t q = pos_; q < s_.size(); ++q) {
    const size_t end = match_tag_end(q, Tag::kComment);
    if (end == std::string::npos) continue;
    line_starting_ = s_[end - 1] == '\n';
    advance(end);
    return {};
  }
  return fail("Missing end of comment tag");
}

Result<void> Lexer::lex_raw() {
  for (size_t q = pos_; q < s_.size(); ++q) {
    if (s_.compare(q, 2, "{%") != 0) continue;
    size_t r = q + 2;
    const char sign = r < s_.size() && (s_[r] == '-' || s_[r] == '+') ? s_[r] : 0;
    if (sign) ++r;
    r += ws_run(s_, r);
    if (s_.compare(r, 6, "endraw") != 0) continue;
    r += 6;
    r += ws_run(s_, r);
    const size_t end = match_tag_end(r, Tag::kBlock);
    if (end == std::string::npos) continue;
    emit_data(s_.substr(pos_, q - pos_), sign, true);
    line_starting_ = s_[end - 1] == '\n';
    advance(end);
    return {};
  }
  return fail("Missing end of raw directive");
}

Result<void> Lexer::lex_tag(Tag tag) {
  emit(tag == Tag::kVariable ? TokenType::kVariableBegin : TokenType::kBlockBegin);
  while (pos_ < s_.size()) {
    if (brackets_.empty()) {
      const size_t end = match_tag_end(pos_, tag);
      if (end != std::string::npos) {
        emit(tag == Tag::kVariable ? TokenType::kVariableEnd : TokenType::kBlockEnd);
        line_starting_ = s_[end - 1] == '\n';
        advance(end);
        return {};
      }
    }
    const size_t ws = ws_run(s_, pos_);
    if (ws > 0) {
      advance(pos_ + ws);
      continue;
    }
    if (auto r = lex_token(); !r) return r;
  }
  return {};  // unterminated tag: the parser reports the unexpected end
}

Result<void> Lexer::lex_token() {
  const char c = s_[pos_];
  const size_t f = match_float(s_, pos_);
  const size_t i = match_integer(s_, pos_);
  if (f != std::string::npos || i != std::string::npos) return lex_number(f, i);
  if (is_name_start(c)) {
    size_t q = pos_;
    while (q < s_.size() && is_name_char(s_[q])) ++q;
    emit(TokenType::kName, s_.substr(pos_, q - pos_));
    advance(q);
    return {};
  }
  if (c == '\'' || c == '"') return lex_string();
  static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*",
                                     "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=",
                                     ".", ":", "|", ",", ";"};
  for (const char* op : kOps) {
    const std::string_view o(op);
    if (s_.compare(pos_, o.size(), o) != 0) continue;
    if (o == "(" || o == "[" || o == "{") brackets_.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
    if (o == ")" || o == "]" || o == "}") {
      if (brackets_.empty()) return fail("unexpected '" + std::string(o) + "'");
      if (brackets_.back() != o[0]) {
        return fail("unexpected '" + std::string(o) + "', expected '" + brackets_.back() + "'");
      }
      brackets_.pop_back();
    }
    emit(TokenType::kOperator, std::string(o));
    advance(pos_ + o.size());
    return {};
  }
  return fail(std::string("unexpected char '") + c + "'");
}

Result<void> Lexer::lex_number(size_t float_end, size_t int_end) {
  const bool is_float = float_end != std::string::npos;
  const size_t end = is_float ? float_end : int_end;
  std::string text;
  for (size_t q = pos_; q < end; ++q) {
    if (s_[q] != '_') text.push_back(s_[q]);
  }
  Token tok;
  tok.line = line_;
  tok.text = text;
  if (is_float) {
    tok.type = TokenType::kFloat;
    std::from_chars(text.data(), text.data() + text.size(), tok.float_value);
  } else {
    tok.type = TokenType::kInteger;
    int base = 10;
    size_t skip = 0;
    if (text.size() > 1 && text[0] == '0') {
      const char b = static_cast<char>(text[1] | 0x20);
      base = b == 'b' ? 2 : b == 'o' ? 8 : b == 'x' ? 16 : 10;
      skip = base == 10 ? 0 : 2;
    }
    const auto r = std::from_chars(text.data() + skip, text.data() + text.size(), tok.int_value, base);
    if (r.ec != std::errc()) return fail("integer literal too large: " + text);
  }
  out_.push_back(std::move(tok));
  advance(end);
  return {};
}

Result<void> Lexer::lex_string() {
  const char quote = s_[pos_];
  size_t q = pos_ + 1;
  while (q < s_.size() && s_[q] != quote) q += s_[q] == '\\' ? 2 : 1;
  if (q >= s_.size()) return fail(std::string("unexpected char '") + quote + "'");
  std::string out, error;
  if (!unescape(std::string_view(s_.data() + pos_ + 1, q - pos_ - 1), out, error)) return fail(error);
  emit(TokenType::kString, std::move(out));
  advance(q + 1);
  return {};
}

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace pagoda::model::jinja
