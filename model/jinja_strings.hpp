// Python str semantics over UTF-8 text, for the Jinja interpreter.
//
// Jinja templates run on Python strings: lengths, indices and slices count
// code points, strip()/split() use Unicode whitespace, repr() escapes the
// unprintable. These helpers give those semantics on std::string holding
// UTF-8. Invalid UTF-8 bytes are treated as single code points (U+FFFD-like
// placeholders that round-trip byte-exactly), never a crash.
//
// Known approximations (documented divergences from CPython):
//  - case mapping (upper/lower/title/capitalize) covers ASCII, Latin-1,
//    Latin Extended-A, Greek, Cyrillic and fullwidth Latin, one-to-one only
//    (no 'ß' -> 'SS'); other scripts are left unchanged;
//  - is_printable() (used by repr) knows the common unprintable ranges but not
//    every unassigned code point.
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

// Character classes (Python's str.isspace(), isprintable(), cased letters).
bool is_space(char32_t c);
bool is_printable(char32_t c);
bool is_word_char(char32_t c);  // regex \w (approximation for non-ASCII)
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);  // has a distinct upper- or lowercase form
bool is_upper_char(char32_t c);
bool is_lower_char(char32_t c);

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
