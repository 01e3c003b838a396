// Python str semantics over UTF-8 (see jinja_strings.hpp).
#include "model/jinja_strings.hpp"

#include <algorithm>
#include <cstdio>

namespace pagoda::model::jinja::pystr {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // invalid byte b decodes to 0xDC00 + b

// Decodes one code point at s[i]; advances i. Invalid bytes become escapes.
char32_t next_cp(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) { ++i; return b0; }
  int len = b0 >= 0xF0 && b0 <= 0xF4 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (len == 0 || i + len > s.size()) { ++i; return kEscapeBase + b0; }
  char32_t cp = b0 & (0xFF >> (len + 1));
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) { ++i; return kEscapeBase + b0; }
    cp = (cp << 6) | (b & 0x3F);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return kEscapeBase + b0;
  }
  i += len;
  return cp;
}

bool in(char32_t c, char32_t lo, char32_t hi) { return c >= lo && c <= hi; }

// One-to-one case pairs outside ASCII: returns the other-case form or c.
char32_t other_case(char32_t c, bool want_upper) {
  if (in(c, 0xC0, 0xDE) && c != 0xD7) return want_upper ? c : c + 0x20;
  if (in(c, 0xE0, 0xFE) && c != 0xF7) return want_upper ? c - 0x20 : c;
  if (c == 0xFF) return want_upper ? 0x178 : c;
  if (c == 0x178) return want_upper ? c : 0xFF;
  if (c == 0xB5) return want_upper ? 0x39C : c;
  const bool even_upper = in(c, 0x100, 0x12F) || in(c, 0x132, 0x137) || in(c, 0x14A, 0x177);
  const bool odd_upper = in(c, 0x139, 0x148) || in(c, 0x179, 0x17E);
  if (even_upper || odd_upper) {
    const bool is_up = ((c & 1) == 0) == even_upper;
    if (want_upper) return is_up ? c : c - 1;
    return is_up ? c + 1 : c;
  }
  if (in(c, 0x391, 0x3A9) && c != 0x3A2) return want_upper ? c : c + 0x20;
  if (in(c, 0x3B1, 0x3C9)) return want_upper ? (c == 0x3C2 ? 0x3A3 : c - 0x20) : c;
  if (in(c, 0x410, 0x42F)) return want_upper ? c : c + 0x20;
  if (in(c, 0x430, 0x44F)) return want_upper ? c - 0x20 : c;
  if (in(c, 0x400, 0x40F)) return want_upper ? c : c + 0x50;
  if (in(c, 0x450, 0x45F)) return want_upper ? c - 0x50 : c;
  if (in(c, 0xFF21, 0xFF3A)) return want_upper ? c : c + 0x20;
  if (in(c, 0xFF41, 0xFF5A)) return want_upper ? c - 0x20 : c;
  return c;
}

template <class F>
std::string map_cps(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_utf8(out, f(next_cp(s, i)));
  return out;
}

// Byte offset -> code-point index.
int64_t cp_index(std::string_view s, size_t byte_pos) {
  return length(s.substr(0, byte_pos));
}

bool char_in(char32_t c, const std::u32string& set) {
  return set.find(c) != std::u32string::npos;
}

}  // namespace

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_cp(s, i));
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {
    out.push_back(static_cast<char>(cp - kEscapeBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

int64_t length(std::string_view s) {
  if (is_ascii(s)) return static_cast<int64_t>(s.size());
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) next_cp(s, i);
  return n;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; });
}

bool is_space(char32_t c) {
  return in(c, 0x09, 0x0D) || in(c, 0x1C, 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || in(c, 0x2000, 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || in(c, 0x7F, 0xA0) || c == 0xAD || is_space(c)) return false;
  if (in(c, 0x600, 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E) return false;
  if (in(c, 0x200B, 0x200F) || in(c, 0x202A, 0x202E) || in(c, 0x2060, 0x206F)) return false;
  if (in(c, 0xD800, 0xF8FF) || c == 0xFEFF || in(c, 0xFFF9, 0xFFFB)) return false;
  if (c == 0xFFFE || c == 0xFFFF || in(c, 0xE0000, 0xE007F)) return false;
  if (in(c, 0xF0000, 0x10FFFF)) return false;
  return true;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                       (c >= 'A' && c <= 'Z') || c == '_';
  if (!is_printable(c)) return false;
  // Common punctuation/symbol blocks are not word characters.
  return !(in(c, 0xA1, 0xBF) || c == 0xD7 || c == 0xF7 || in(c, 0x2010, 0x2BFF) ||
           in(c, 0x3000, 0x303F) || in(c, 0xFE30, 0xFE4F) || in(c, 0xFF01, 0xFF0F) ||
           in(c, 0xFF1A, 0xFF20) || in(c, 0x1F000, 0x1FAFF));
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  return other_case(c, true);
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return other_case(c, false);
}

bool is_upper_char(char32_t c) { return to_lower(c) != c; }
bool is_lower_char(char32_t c) { return to_upper(c) != c || c == 0xDF; }
bool is_cased(char32_t c) { return is_upper_char(c) || is_lower_char(c); }

std::string upper(std::string_view s) { return map_cps(s, to_upper); }
std::string lower(std::string_view s) { return map_cps(s, to_lower); }
std::string swapcase(std::string_view s) {
  return map_cps(s, [](char32_t c) { return is_upper_char(c) ? to_lower(c) : to_upper(c); });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_cps(s, [&](char32_t c) {
    const char32_t r = first ? to_upper(c) : to_lower(c);
    first = false;
    return r;
  });
}

std::string title_method(std::string_view s) {
  bool prev_cased = false;
  return map_cps(s, [&](char32_t c) {
    char32_t r = c;
    if (is_upper_char(c)) {
      if (prev_cased) r = to_lower(c);
      prev_cased = true;
    } else if (is_lower_char(c)) {
      if (!prev_cased) r = to_upper(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
    return r;
  });
}

bool islower(std::string_view s) {
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next_cp(s, i);
    if (is_upper_char(c)) return false;
    any = any || is_lower_char(c);
  }
  return any;
}

bool isupper(std::string_view s) {
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next_cp(s, i);
    if (is_lower_char(c)) return false;
    any = any || is_upper_char(c);
  }
  return any;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string cps = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? char_in(c, set) : is_space(c); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_it(cps[b])) ++b;
  if (right) while (e > b && strip_it(cps[e - 1])) --e;
  return encode(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string cps = decode(s);
  size_t i = 0;
  const size_t n = cps.size();
  while (true) {
    while (i < n && is_space(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(encode(std::u32string_view(cps).substr(i)));
      break;
    }
    size_t j = i;
    while (j < n && !is_space(cps[j])) ++j;
    out.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::u32string cps = decode(s);
  size_t j = cps.size();
  while (true) {
    while (j > 0 && is_space(cps[j - 1])) --j;
    if (j == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(encode(std::u32string_view(cps).substr(0, j)));
      break;
    }
    size_t i = j;
    while (i > 0 && !is_space(cps[i - 1])) --i;
    out.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
    j = i;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string cps = decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  const size_t n = cps.size();
  while (i < n) {
    const char32_t c = cps[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || in(c, 0x1C, 0x1E) ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) { ++i; continue; }
    size_t eol = i + 1;
    if (c == '\r' && eol < n && cps[eol] == '\n') ++eol;
    const size_t stop = keepends ? eol : i;
    out.push_back(encode(std::u32string_view(cps).substr(start, stop - start)));
    start = i = eol;
  }
  if (start < n) out.push_back(encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::u32string cps = decode(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) { out += repl; ++done; }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t find(std::string_view s, std::string_view sub) {
  const size_t hit = s.find(sub);
  return hit == std::string_view::npos ? -1 : cp_index(s, hit);
}

int64_t rfind(std::string_view s, std::string_view sub) {
  const size_t hit = s.rfind(sub);
  return hit == std::string_view::npos ? -1 : cp_index(s, hit);
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return length(s) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next_cp(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') { out += "\\n";
    } else if (c == '\r') { out += "\\r";
    } else if (c == '\t') { out += "\\t";
    } else if (is_printable(c)) { append_utf8(out, c);
    } else {
      const char* fmt = c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x";
      std::snprintf(buf, sizeof buf, fmt, static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string pad(std::string_view s, int64_t width, std::string_view fill, int where) {
  const int64_t len = length(s);
  if (width <= len) return std::string(s);
  const int64_t marg = width - len;
  int64_t left = 0;
  if (where < 0) left = 0;            // ljust
  else if (where > 0) left = marg;    // rjust
  else left = marg / 2 + (marg & width & 1);  // center, as CPython
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = left; k < marg; ++k) out += fill;
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace pagoda::model::jinja::pystr
