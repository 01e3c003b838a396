// The JSON files of a model directory (see json_file.hpp).
#include "model/json_file.hpp"

#include <fstream>
#include <sstream>

namespace pagoda::model {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// digits (no sign, no leading zeros but "0") fits within `limit` (same form)?
bool fits(std::string_view digits, std::string_view limit) {
  if (digits.size() != limit.size()) return digits.size() < limit.size();
  return digits <= limit;
}

}  // namespace

std::string widen_big_integers(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"') {  // copy the string, escapes included, up to its closing quote
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, s.size());
      out.append(s.substr(i, j - i));
      i = j;
      continue;
    }
    if (c != '-' && !is_digit(c)) {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t j = i + (c == '-' ? 1 : 0);
    const size_t first_digit = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    const bool integer = j == s.size() || (s[j] != '.' && s[j] != 'e' && s[j] != 'E');
    const std::string_view digits = s.substr(first_digit, j - first_digit);
    out.append(s.substr(i, j - i));
    if (integer && !digits.empty()) {
      const bool negative = c == '-';
      const bool in_range = negative ? fits(digits, "9223372036854775808")
                                     : fits(digits, "18446744073709551615");
      if (!in_range) out += ".0";
    }
    i = j;
  }
  return out;
}

Result<simdjson::dom::element> load_json_file(const std::string& path,
                                              simdjson::dom::parser& parser) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot read: no such file or not readable");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(path + ": cannot read: I/O error");
  const simdjson::padded_string padded(widen_big_integers(text.str()));
  simdjson::dom::element doc;
  // parse() copies the text into the parser's own buffer.
  if (auto e = parser.parse(padded).get(doc); e != simdjson::SUCCESS) {
    return make_error(path + ": invalid JSON: " + simdjson::error_message(e));
  }
  return doc;
}

}  // namespace pagoda::model
