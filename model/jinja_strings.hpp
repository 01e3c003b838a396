// Python str semantics over UTF-8 text, for the Jinja interpreter.
//
// Jinja templates run on Python strings: lengths, indices and slices count
// code points, strip()/split() use Unicode whitespace, repr() escapes the
// unprintable. These helpers give those semantics on std::string holding
// UTF-8. An invalid UTF-8 byte is treated as one code point (0xDC00 + byte,
// as Python's surrogateescape) that round-trips byte-exactly, never a crash.
//
// Character properties and case mappings come from tables generated from
// Python's own unicodedata (jinja_unicode_data.cpp, tools/gen-jinja-unicode.py),
// including full mappings ('ß'.upper() == "SS") and the final-sigma rule of
// lower(). Known approximations: casefold() is lower(); Case_Ignorable (used
// only by the final-sigma rule) is derived from general categories.
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::model::jinja::pystr {

// Decoding / encoding. decode() maps each invalid byte b to 0xDC00 + b (as
// Python's surrogateescape), encode() maps those back to the raw byte.
std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view cps);
void append_utf8(std::string& out, char32_t cp);
int64_t length(std::string_view utf8);  // number of code points
bool is_ascii(std::string_view s);

// Character classes, as Python's str.isspace(), isprintable(), isalpha(),
// isdecimal(), isdigit(), isnumeric(), isalnum() of a one-character string,
// regex \w, and the Uppercase/Lowercase/Lt/Cased properties.
bool is_space(char32_t c);
bool is_printable(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_alnum(char32_t c);
bool is_word_char(char32_t c);
bool is_upper_char(char32_t c);
bool is_lower_char(char32_t c);
bool is_title_char(char32_t c);
bool is_cased(char32_t c);

// str methods.
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);   // str.capitalize()
std::string title_method(std::string_view s); // str.title()
std::string swapcase(std::string_view s);
bool islower(std::string_view s);
bool isupper(std::string_view s);
// strip family: chars unset = Unicode whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars,
                  bool left, bool right);
// split(): sep unset = runs of whitespace (empty strings dropped). maxsplit<0
// means no limit. rsplit splits from the right.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// replace(): count<0 replaces all; an empty `old` inserts between code points.
std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count);
// find()/rfind() return a code-point index or -1; count() non-overlapping.
int64_t find(std::string_view s, std::string_view sub);
int64_t rfind(std::string_view s, std::string_view sub);
int64_t count(std::string_view s, std::string_view sub);
// repr(str): Python quoting and escapes.
std::string repr(std::string_view s);
// Python's str.center/ljust/rjust with a one-code-point fill.
std::string pad(std::string_view s, int64_t width, std::string_view fill, int where);
// HTML escaping as markupsafe.escape does.
std::string html_escape(std::string_view s);

}  // namespace pagoda::model::jinja::pystr
