// UTF-8 helpers for the tokenizers: decoding one code point with the
// well-formedness rules of Unicode Table 3-7, encoding, and lossy conversion
// of arbitrary bytes (each maximal ill-formed subpart becomes one U+FFFD, the
// rule Rust's String::from_utf8_lossy and HF tokenizers follow).
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::model::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;

struct Decoded {
  char32_t cp;      // the code point, or kReplacement when !valid
  uint32_t len;     // bytes consumed: the whole character, or the maximal ill-formed subpart
  bool valid;
};

// Length of the well-formed sequence a lead byte starts (1-4), 0 for a byte
// that cannot start one (continuation bytes, C0, C1, F5..FF).
inline uint32_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// The allowed range of the second byte after `lead` (Table 3-7).
inline void second_byte_range(uint8_t lead, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead == 0xE0) lo = 0xA0;
  else if (lead == 0xED) hi = 0x9F;
  else if (lead == 0xF0) lo = 0x90;
  else if (lead == 0xF4) hi = 0x8F;
}

// Decodes the character starting at p (p < end). Never reads past end.
inline Decoded decode(const char* p, const char* end) {
  const uint8_t b0 = static_cast<uint8_t>(*p);
  if (b0 < 0x80) return {b0, 1, true};
  const uint32_t n = sequence_length(b0);
  if (n == 0) return {kReplacement, 1, false};
  uint8_t lo, hi;
  second_byte_range(b0, lo, hi);
  char32_t cp = b0 & (0x7F >> n);
  for (uint32_t i = 1; i < n; ++i) {
    if (p + i >= end) return {kReplacement, i, false};
    const uint8_t b = static_cast<uint8_t>(p[i]);
    if (b < lo || b > hi) return {kReplacement, i, false};
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  return {cp, n, true};
}

// Appends the UTF-8 encoding of cp (cp must be a scalar value).
void append(std::string& out, char32_t cp);

// Appends bytes to out, replacing each maximal ill-formed subpart by U+FFFD.
void append_lossy(std::string& out, std::string_view bytes);

// True when bytes are entirely well-formed UTF-8.
bool is_valid(std::string_view bytes);

// Length of a trailing sequence that is ill-formed only because it is cut
// short (a valid prefix of a character), 0 when the text ends on a boundary
// or the tail is ill-formed for another reason.
size_t incomplete_tail(std::string_view bytes);

}  // namespace pagoda::model::utf8
