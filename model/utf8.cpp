#include "model/utf8.hpp"

namespace pagoda::model::utf8 {

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
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

void append_lossy(std::string& out, std::string_view bytes) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  const char* run = p;  // start of the pending well-formed run
  while (p < end) {
    if (static_cast<uint8_t>(*p) < 0x80) {
      ++p;
      continue;
    }
    const Decoded d = decode(p, end);
    if (d.valid) {
      p += d.len;
      continue;
    }
    out.append(run, p);
    append(out, kReplacement);
    p += d.len;
    run = p;
  }
  out.append(run, end);
}

bool is_valid(std::string_view bytes) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  while (p < end) {
    const Decoded d = decode(p, end);
    if (!d.valid) return false;
    p += d.len;
  }
  return true;
}

size_t incomplete_tail(std::string_view bytes) {
  // A cut-short character has at most 3 bytes; find its lead among them.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(bytes[n - back]);
    if (b >= 0x80 && b < 0xC0) continue;  // continuation byte: keep looking for the lead
    const uint32_t need = sequence_length(b);
    if (need <= back) return 0;  // complete (or not a lead at all)
    const Decoded d = decode(bytes.data() + n - back, bytes.data() + n);
    // Ill-formed only for running out of bytes: it consumed everything there was.
    return d.len == back ? back : 0;
  }
  return 0;
}

}  // namespace pagoda::model::utf8
