// ToolCallScanner (net/tool_call_scanner.hpp).
#include "net/tool_call_scanner.hpp"

namespace pagoda::net {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

bool read_hex4(std::string_view s, size_t at, uint32_t& out) {
  if (at + 4 > s.size()) return false;
  out = 0;
  for (size_t i = at; i < at + 4; ++i) {
    const char c = s[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    out = out * 16 + uint32_t(d);
  }
  return true;
}

// One escape at s[i] (after the backslash); advances i past it.
bool decode_escape(std::string_view s, size_t& i, std::string& out) {
  const char e = s[i++];
  switch (e) {
    case '"': out += '"'; return true;
    case '\\': out += '\\'; return true;
    case '/': out += '/'; return true;
    case 'b': out += '\b'; return true;
    case 'f': out += '\f'; return true;
    case 'n': out += '\n'; return true;
    case 'r': out += '\r'; return true;
    case 't': out += '\t'; return true;
    case 'u': break;
    default: return false;
  }
  uint32_t cp = 0;
  if (!read_hex4(s, i, cp)) return false;
  i += 4;
  if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u') {
    uint32_t lo = 0;
    if (read_hex4(s, i + 2, lo) && lo >= 0xDC00 && lo < 0xE000) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      i += 6;
    }
  }
  append_utf8(cp, out);
  return true;
}

}  // namespace

bool decode_json_string(std::string_view lit, std::string& out) {
  if (lit.size() < 2 || lit.front() != '"' || lit.back() != '"') return false;
  out.clear();
  size_t i = 1;
  while (i + 1 < lit.size()) {
    const char c = lit[i++];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i + 1 >= lit.size() || !decode_escape(lit, i, out)) return false;
  }
  return true;
}

std::string ToolCallScanner::take_arguments() {
  std::string out;
  out.swap(args_ready_);
  return out;
}

ToolCallScanner::Step ToolCallScanner::on_key_done() {
  if (key_ == "name") {
    target_ = Target::name;
  } else if (key_ == "arguments" || key_ == "parameters") {
    if (args_seen_) return Step::error;
    target_ = Target::arguments;
  } else if (key_ == "type" || key_ == "id") {
    target_ = Target::skip;
  } else {
    return Step::error;
  }
  state_ = State::colon;
  return Step::more;
}

ToolCallScanner::Step ToolCallScanner::on_value_start(char c) {
  if (is_space(c)) return Step::more;
  if (target_ == Target::name) {
    if (c != '"' || name_done_) return Step::error;
    state_ = State::name_string;
    return Step::more;
  }
  if (c == ',' || c == '}' || c == ']' || c == ':') return Step::error;
  brackets_.clear();
  in_string_ = c == '"';
  scalar_ = c != '"' && c != '{' && c != '[';
  if (c == '{' || c == '[') brackets_ += c;
  if (target_ == Target::arguments) {
    args_seen_ = true;
    args_string_ = c == '"';
    (args_string_ ? args_raw_ : args_ready_) += c;
  }
  state_ = State::value;
  return Step::more;
}

ToolCallScanner::Step ToolCallScanner::end_value() {
  if (target_ == Target::arguments) {
    args_done_ = true;
    if (args_string_) {
      std::string text;
      if (!decode_json_string(args_raw_, text)) return Step::error;
      args_ready_ += text;
    }
  }
  state_ = State::after_value;
  return Step::more;
}

ToolCallScanner::Step ToolCallScanner::on_value(char c) {
  if (scalar_) {
    if (is_space(c) || c == ',' || c == '}') {
      if (end_value() == Step::error) return Step::error;
      return after_value(c);
    }
    if (c == '"' || c == '{' || c == '[' || c == ']' || c == ':') return Step::error;
    if (target_ == Target::arguments) args_ready_ += c;
    return Step::more;
  }
  const bool closer = !in_string_ && (c == '}' || c == ']');
  if (closer && brackets_.back() != (c == '}' ? '{' : '[')) return Step::error;
  if (target_ == Target::arguments) (args_string_ ? args_raw_ : args_ready_) += c;
  if (in_string_) {
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (brackets_.empty()) return end_value();
    }
    return Step::more;
  }
  if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    brackets_ += c;
  } else if (closer) {
    brackets_.pop_back();
    if (brackets_.empty()) return end_value();
  }
  return Step::more;
}

ToolCallScanner::Step ToolCallScanner::after_value(char c) {
  if (is_space(c)) return Step::more;
  if (c == ',') {
    state_ = State::key_required;
    return Step::more;
  }
  return c == '}' ? Step::done : Step::error;
}

ToolCallScanner::Step ToolCallScanner::push(char c) {
  switch (state_) {
    case State::open:
      if (is_space(c)) return Step::more;
      if (c != '{') return Step::error;
      state_ = State::key_or_end;
      return Step::more;
    case State::key_or_end:
    case State::key_required:
      if (is_space(c)) return Step::more;
      if (c == '}' && state_ == State::key_or_end) return Step::done;
      if (c != '"') return Step::error;
      key_.clear();
      state_ = State::key;
      return Step::more;
    case State::key:
      if (escape_) {
        escape_ = false;
        key_ += c;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        return on_key_done();
      } else {
        key_ += c;
      }
      return Step::more;
    case State::colon:
      if (is_space(c)) return Step::more;
      if (c != ':') return Step::error;
      state_ = State::value_start;
      return Step::more;
    case State::value_start: return on_value_start(c);
    case State::name_string: return push_name(c);
    case State::value: return on_value(c);
    case State::after_value: return after_value(c);
  }
  return Step::error;
}

ToolCallScanner::Step ToolCallScanner::push_name(char c) {
  name_raw_ += c;
  if (escape_) {
    escape_ = false;
    return Step::more;
  }
  if (c == '\\') {
    escape_ = true;
    return Step::more;
  }
  if (c != '"') return Step::more;
  const std::string literal = "\"" + name_raw_;
  if (!decode_json_string(literal, name_) || name_.empty()) return Step::error;
  name_done_ = true;
  state_ = State::after_value;
  return Step::more;
}

}  // namespace pagoda::net
