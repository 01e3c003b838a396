#include "model/incremental_decoder.hpp"

#include <simdjson.h>

#include "model/utf8.hpp"

namespace pagoda::model {
namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";
using simdjson::dom::element;

// One decoder of a tokenizer.json chain, folded into d.
Result<void> parse_decoder_step(const element& json, DecoderSpec& d) {
  std::string_view type;
  if (json["type"].get(type) != simdjson::SUCCESS) return make_error("decoder without a \"type\"");
  if (type == "ByteLevel") {
    d.kind = DecoderSpec::Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    d.byte_fallback = true;
  } else if (type == "Fuse") {
  } else if (type == "Replace") {
    std::string_view from, to;
    if (json["pattern"]["String"].get(from) != simdjson::SUCCESS || json["content"].get(to) != simdjson::SUCCESS) {
      return make_error("decoder Replace: only String patterns are supported");
    }
    d.replace_from = std::string(from);
    d.replace_to = std::string(to);
  } else if (type == "Strip") {
    std::string_view content;
    int64_t start = 0, stop = 0;
    if (json["content"].get(content) != simdjson::SUCCESS || content != " " ||
        json["start"].get(start) != simdjson::SUCCESS || start != 1 ||
        (json["stop"].get(stop) == simdjson::SUCCESS && stop != 0)) {
      return make_error("decoder Strip: only Strip(' ', 1, 0) is supported");
    }
    d.strip = DecoderSpec::Strip::kLeadingSpace;
  } else if (type == "Metaspace") {
    Result<Metaspace> m = Metaspace::from_json(json);
    if (!m) return m.error();
    d.replace_from = m->replacement;
    d.replace_to = " ";
    if (m->prepend != PrependScheme::kNever) d.strip = DecoderSpec::Strip::kFirstTokenReplacement;
  } else if (type == "Sequence") {
    simdjson::dom::array items;
    if (json["decoders"].get(items) != simdjson::SUCCESS) return make_error("decoder Sequence without \"decoders\"");
    for (element item : items) {
      Result<void> r = parse_decoder_step(item, d);
      if (!r) return r;
    }
  } else {
    return make_error("unsupported decoder type \"" + std::string(type) + "\"");
  }
  return {};
}

}  // namespace

Result<DecoderSpec> DecoderSpec::from_json(const element& json) {
  DecoderSpec d;
  if (json.is_null()) {
    d.kind = DecoderSpec::Kind::kNone;
    return d;
  }
  d.kind = DecoderSpec::Kind::kPieces;
  Result<void> r = parse_decoder_step(json, d);
  if (!r) return r.error();
  if (d.kind == DecoderSpec::Kind::kByteLevel && (d.byte_fallback || !d.replace_from.empty())) {
    return make_error("decoder: ByteLevel combined with other decoders is not supported");
  }
  return d;
}

IncrementalDecoder::IncrementalDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special)
    : tok_(std::move(tokenizer)), skip_special_(skip_special) {}

void IncrementalDecoder::reset() {
  pending_.clear();
  in_byte_run_ = false;
  first_token_ = true;
  at_start_ = true;
}

void IncrementalDecoder::append_stripped(std::string_view bytes) {
  if (at_start_ && !bytes.empty()) {
    at_start_ = false;
    if (tok_->decoder().strip == DecoderSpec::Strip::kLeadingSpace && bytes[0] == ' ') bytes.remove_prefix(1);
  }
  pending_.append(bytes);
}

// Moves the finished part of pending_ to out. Byte-level text repairs
// ill-formed bytes per maximal subpart; a byte-fallback run per byte.
void IncrementalDecoder::emit(std::string& out, bool final_flush) {
  const size_t keep = final_flush ? 0 : utf8::incomplete_tail(pending_);
  const std::string_view ready = std::string_view(pending_).substr(0, pending_.size() - keep);
  if (!in_byte_run_) {
    utf8::append_lossy(out, ready);
  } else {
    const char* p = ready.data();
    const char* end = p + ready.size();
    while (p < end) {
      const utf8::Decoded d = utf8::decode(p, end);
      if (d.valid) out.append(p, d.len);
      else for (uint32_t i = 0; i < d.len; ++i) out += kReplacementUtf8;
      p += d.len;
    }
  }
  pending_.erase(0, pending_.size() - keep);
}

size_t IncrementalDecoder::push(int32_t id, std::string& out) {
  const size_t before = out.size();
  if (id < 0 || id >= tok_->vocab_size() || tok_->piece(id).empty()) return 0;
  if (skip_special_ && tok_->is_special(id)) return 0;
  const uint32_t byte = tok_->byte_token(id);
  if (in_byte_run_ && !byte) {
    emit(out, true);  // the run is over: an unfinished character in it is ill-formed
    in_byte_run_ = false;
  }
  if (byte) {
    if (!in_byte_run_) emit(out, true);
    in_byte_run_ = true;
    const char b = static_cast<char>(byte & 0xFF);
    append_stripped(std::string_view(&b, 1));
  } else if (tok_->decoder().kind == DecoderSpec::Kind::kNone) {
    if (!first_token_) append_stripped(" ");
    append_stripped(tok_->piece(id));
  } else {
    append_stripped(first_token_ ? tok_->first_token_bytes(id) : tok_->token_bytes(id));
  }
  first_token_ = false;
  emit(out, false);
  return out.size() - before;
}

std::string IncrementalDecoder::finish() {
  std::string out;
  emit(out, true);
  reset();
  return out;
}

}  // namespace pagoda::model
