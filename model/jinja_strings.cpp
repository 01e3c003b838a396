// Python str semantics over UTF-8 (see jinja_strings.hpp).
#include "model/jinja_strings.hpp"

#include "model/utf8.hpp"

#include "model/jinja_unicode_data.hpp"

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

bool in_ranges(char32_t c, const data::Range* r, size_t n) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (r[mid].hi < c) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && r[lo].lo <= c;
}

struct CaseTable {
  const data::CaseRun* runs;
  size_t nruns;
  const data::SpecialCase* special;
  size_t nspecial;
};
const CaseTable kUpperMap{data::kToUpperRuns, data::kToUpperRunsCount, data::kToUpperSpecial, data::kToUpperSpecialCount};
const CaseTable kLowerMap{data::kToLowerRuns, data::kToLowerRunsCount, data::kToLowerSpecial, data::kToLowerSpecialCount};
const CaseTable kTitleMap{data::kToTitleRuns, data::kToTitleRunsCount, data::kToTitleSpecial, data::kToTitleSpecialCount};

// Appends Python's full case mapping of c.
void append_mapped(std::string& out, char32_t c, const CaseTable& t) {
  size_t lo = 0, hi = t.nspecial;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (t.special[mid].cp < c) lo = mid + 1;
    else hi = mid;
  }
  if (lo < t.nspecial && t.special[lo].cp == c) {
    for (char32_t m : t.special[lo].out) {
      if (m) append_utf8(out, m);
    }
    return;
  }
  lo = 0, hi = t.nruns;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (t.runs[mid].hi < c) lo = mid + 1;
    else hi = mid;
  }
  if (lo < t.nruns && t.runs[lo].lo <= c && (c - t.runs[lo].lo) % t.runs[lo].stride == 0) {
    c = static_cast<char32_t>(static_cast<int64_t>(c) + t.runs[lo].delta);
  }
  append_utf8(out, c);
}

bool is_case_ignorable(char32_t c) { return in_ranges(c, data::kCaseIgnorable, data::kCaseIgnorableCount); }

// lower() of cps[i] in context: CPython's handling of the final sigma.
void append_lower(std::string& out, const std::u32string& cps, size_t i) {
  if (cps[i] != 0x3A3) {
    append_mapped(out, cps[i], kLowerMap);
    return;
  }
  size_t j = i;
  while (j > 0 && is_case_ignorable(cps[j - 1])) --j;
  bool final_sigma = j > 0 && is_cased(cps[j - 1]);
  if (final_sigma) {
    size_t k = i + 1;
    while (k < cps.size() && is_case_ignorable(cps[k])) ++k;
    final_sigma = k == cps.size() || !is_cased(cps[k]);
  }
  append_utf8(out, final_sigma ? 0x3C2 : 0x3C3);
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
  // Code points in the escape range stand for raw (invalid UTF-8) bytes.
  if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {
    out.push_back(static_cast<char>(cp - kEscapeBase));
  } else {
    utf8::append(out, cp);
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

bool is_printable(char32_t c) { return in_ranges(c, data::kPrintable, data::kPrintableCount); }
bool is_alpha(char32_t c) { return in_ranges(c, data::kAlpha, data::kAlphaCount); }
bool is_decimal(char32_t c) { return in_ranges(c, data::kDecimal, data::kDecimalCount); }
bool is_digit(char32_t c) { return in_ranges(c, data::kDigit, data::kDigitCount); }
bool is_numeric(char32_t c) { return in_ranges(c, data::kNumeric, data::kNumericCount); }
bool is_alnum(char32_t c) { return is_alpha(c) || is_decimal(c) || is_digit(c) || is_numeric(c); }
bool is_word_char(char32_t c) { return c == '_' || is_alnum(c); }
bool is_upper_char(char32_t c) { return in_ranges(c, data::kUpper, data::kUpperCount); }
bool is_lower_char(char32_t c) { return in_ranges(c, data::kLower, data::kLowerCount); }
bool is_title_char(char32_t c) { return in_ranges(c, data::kTitle, data::kTitleCount); }
bool is_cased(char32_t c) { return in_ranges(c, data::kCased, data::kCasedCount); }

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_mapped(out, next_cp(s, i), kUpperMap);
  return out;
}

std::string lower(std::string_view s) {
  const std::u32string cps = decode(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < cps.size(); ++i) append_lower(out, cps, i);
  return out;
}

std::string swapcase(std::string_view s) {
  const std::u32string cps = decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (is_upper_char(cps[i])) append_lower(out, cps, i);
    else if (is_lower_char(cps[i])) append_mapped(out, cps[i], kUpperMap);
    else append_utf8(out, cps[i]);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  const std::u32string cps = decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) append_mapped(out, cps[0], kTitleMap);
    else append_lower(out, cps, i);
  }
  return out;
}

std::string title_method(std::string_view s) {
  const std::u32string cps = decode(s);
  std::string out;
  bool prev_cased = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (prev_cased) append_lower(out, cps, i);
    else append_mapped(out, cps[i], kTitleMap);
    prev_cased = is_cased(cps[i]);
  }
  return out;
}

bool islower(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next_cp(s, i);
    if (is_upper_char(c) || is_title_char(c)) return false;
    cased = cased || is_lower_char(c);
  }
  return cased;
}

bool isupper(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next_cp(s, i);
    if (is_lower_char(c) || is_title_char(c)) return false;
    cased = cased || is_upper_char(c);
  }
  return cased;
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
