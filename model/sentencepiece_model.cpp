#include "model/sentencepiece_model.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

namespace pagoda::model {
namespace {

// A cursor over one protobuf message. Every read checks bounds; `ok` turns
// false (and stays false) on malformed input.
struct Wire {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  bool more() const { return ok && p < end; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      const uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (!ok || n > static_cast<uint64_t>(end - p)) {
      ok = false;
      return {};
    }
    std::string_view s(reinterpret_cast<const char*>(p), n);
    p += n;
    return s;
  }
  float fixed32_float() {
    if (end - p < 4) {
      ok = false;
      return 0.0f;
    }
    uint32_t u = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    p += 4;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1: p = (end - p < 8) ? (ok = false, end) : p + 8; break;
      case 2: bytes(); break;
      case 5: p = (end - p < 4) ? (ok = false, end) : p + 4; break;
      default: ok = false;  // groups (3, 4) and unknown types
    }
  }
};

Wire sub(std::string_view s) {
  auto* b = reinterpret_cast<const uint8_t*>(s.data());
  return Wire{b, b + s.size()};
}

bool parse_piece(std::string_view msg, SentencePieceModel::Piece& out) {
  Wire w = sub(msg);
  while (w.more()) {
    const uint64_t key = w.varint();
    const uint32_t field = key >> 3, type = key & 7;
    if (field == 1 && type == 2) out.piece = std::string(w.bytes());
    else if (field == 2 && type == 5) out.score = w.fixed32_float();
    else if (field == 3 && type == 0) out.type = static_cast<int32_t>(w.varint());
    else w.skip(type);
  }
  return w.ok;
}

bool parse_trainer(std::string_view msg, SentencePieceModel& m) {
  Wire w = sub(msg);
  while (w.more()) {
    const uint64_t key = w.varint();
    const uint32_t field = key >> 3, type = key & 7;
    if (type != 0) {
      w.skip(type);
      continue;
    }
    const auto v = static_cast<int32_t>(static_cast<int64_t>(w.varint()));
    switch (field) {
      case 3: m.model_type = v; break;
      case 35: m.byte_fallback = v != 0; break;
      case 40: m.unk_id = v; break;
      case 41: m.bos_id = v; break;
      case 42: m.eos_id = v; break;
      case 43: m.pad_id = v; break;
      default: break;
    }
  }
  return w.ok;
}

bool parse_normalizer(std::string_view msg, SentencePieceModel& m) {
  Wire w = sub(msg);
  while (w.more()) {
    const uint64_t key = w.varint();
    const uint32_t field = key >> 3, type = key & 7;
    if (field == 1 && type == 2) m.normalizer_name = std::string(w.bytes());
    else if (field == 2 && type == 2) m.has_precompiled_charsmap = !w.bytes().empty();
    else if (field == 3 && type == 0) m.add_dummy_prefix = w.varint() != 0;
    else if (field == 4 && type == 0) m.remove_extra_whitespaces = w.varint() != 0;
    else if (field == 5 && type == 0) m.escape_whitespaces = w.varint() != 0;
    else w.skip(type);
  }
  return w.ok;
}

}  // namespace

Result<SentencePieceModel> SentencePieceModel::parse(std::string_view bytes) {
  SentencePieceModel m;
  Wire w = sub(bytes);
  while (w.more()) {
    const uint64_t key = w.varint();
    const uint32_t field = key >> 3, type = key & 7;
    bool good = true;
    if (field >= 1 && field <= 3 && type == 2) {
      const std::string_view msg = w.bytes();
      if (!w.ok) break;
      if (field == 1) {
        m.pieces.emplace_back();
        good = parse_piece(msg, m.pieces.back());
      } else if (field == 2) {
        good = parse_trainer(msg, m);
      } else {
        good = parse_normalizer(msg, m);
      }
    } else {
      w.skip(type);
    }
    if (!good) return make_error("malformed SentencePiece model: bad nested message (field " +
                                 std::to_string(field) + ")");
  }
  if (!w.ok) return make_error("malformed SentencePiece model: truncated or bad protobuf");
  if (m.pieces.empty()) return make_error("SentencePiece model has no pieces");
  return m;
}

Result<SentencePieceModel> SentencePieceModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open SentencePiece model " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  Result<SentencePieceModel> m = parse(buf.str());
  if (!m) return make_error(path + ": " + m.error().message);
  return m;
}

}  // namespace pagoda::model
