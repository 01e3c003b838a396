// Tokenizer: construction from TokenizerParts, added-token matching,
// encoding and decoding; then the loaders (tokenizer.json, HF directory,
// SentencePiece model, GGUF), each building TokenizerParts.
#include "model/tokenizer.hpp"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>

#include "model/gguf_file.hpp"
#include "model/json_file.hpp"
#include "model/sentencepiece_model.hpp"
#include "model/unicode_tables.hpp"
#include "model/utf8.hpp"

namespace pagoda::model {
namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// ByteLevel decoding of one token: each character back to its byte; a token
// with a character outside the byte alphabet keeps its UTF-8 bytes.
void append_byte_level(std::string_view piece, std::string& out) {
  const size_t mark = out.size();
  const char* p = piece.data();
  const char* end = p + piece.size();
  while (p < end) {
    const utf8::Decoded d = utf8::decode(p, end);
    const int byte = d.valid ? unicode_to_byte(d.cp) : -1;
    if (byte < 0) {
      out.resize(mark);
      out.append(piece);
      return;
    }
    out.push_back(static_cast<char>(byte));
    p += d.len;
  }
}

// The byte of a "<0xNN>" piece, or -1.
int byte_fallback_value(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void replace_into(std::string_view in, std::string_view from, std::string_view to, std::string& out) {
  if (from.empty()) {
    out.append(in);
    return;
  }
  size_t pos = 0;
  for (size_t hit; (hit = in.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(in.substr(pos, hit - pos)).append(to);
  }
  out.append(in.substr(pos));
}

// The character ending just before `pos` / starting at `pos` (ill-formed bytes
// count as a class-less character).
uint8_t class_before(std::string_view s, size_t pos) {
  size_t start = pos;
  while (start > 0 && pos - start < 4) {
    --start;
    if ((static_cast<uint8_t>(s[start]) & 0xC0) != 0x80) break;
  }
  const utf8::Decoded d = utf8::decode(s.data() + start, s.data() + pos);
  return d.valid && start + d.len == pos ? unicode::classify(d.cp) : 0;
}

uint8_t class_at(std::string_view s, size_t pos) {
  const utf8::Decoded d = utf8::decode(s.data() + pos, s.data() + s.size());
  return d.valid ? unicode::classify(d.cp) : 0;
}

// Start of the whitespace run that ends text[..pos] / end of the one that starts text[pos..].
size_t space_run_start(std::string_view s, size_t pos) {
  while (pos > 0 && (class_before(s, pos) & unicode::kSpaceBit)) {
    do --pos; while (pos > 0 && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80);
  }
  return pos;
}

size_t space_run_end(std::string_view s, size_t pos) {
  while (pos < s.size() && (class_at(s, pos) & unicode::kSpaceBit)) {
    pos += utf8::decode(s.data() + pos, s.data() + s.size()).len;
  }
  return pos;
}

}  // namespace

struct Tokenizer::Scratch {
  std::vector<Segment> segments, inner;
  std::vector<Span> spans, spans2;
  std::string normalized, meta;
  BpeScratch bpe;
};

Tokenizer::Tokenizer(TokenizerParts p)
    : kind_(p.kind),
      model_(std::move(p.model)),
      pre_(std::move(p.pre)),
      metaspace_(std::move(p.metaspace)),
      normalizer_(std::move(p.normalizer)),
      byte_level_(p.byte_level),
      added_(std::move(p.added)),
      decoder_(std::move(p.decoder)),
      bos_id_(p.bos_id),
      eos_id_(p.eos_id),
      unk_id_(p.unk_id),
      pad_id_(p.pad_id),
      add_bos_(p.add_bos),
      add_eos_(p.add_eos) {
  pieces_ = model_.pieces();
  for (const AddedToken& t : added_) {
    if (t.id >= 0 && static_cast<size_t>(t.id) >= pieces_.size()) pieces_.resize(t.id + 1);
  }
  types_.assign(pieces_.size(), TokenType::kNormal);
  for (size_t id = 0; id < p.types.size() && id < types_.size(); ++id) types_[id] = p.types[id];
  special_.assign(pieces_.size(), 0);
  by_first_raw_.assign(256, {});
  by_first_norm_.assign(256, {});
  patterns_.assign(added_.size(), {});
  std::string pattern;
  for (size_t i = 0; i < added_.size(); ++i) {
    AddedToken& t = added_[i];
    if (t.id < 0 || t.content.empty()) continue;
    pieces_[t.id] = t.content;
    special_[t.id] = t.special;
    if (p.types.empty() || static_cast<size_t>(t.id) >= p.types.size()) {
      types_[t.id] = t.special ? TokenType::kControl : TokenType::kUserDefined;
    }
    // A normalized token is matched by its normalized form (HF normalizes the pattern).
    pattern = t.content;
    if (t.normalized && !normalizer_.empty()) normalizer_.apply(t.content, pattern);
    if (pattern.empty()) continue;
    patterns_[i] = pattern;
    auto& table = t.normalized ? by_first_norm_ : by_first_raw_;
    has_normalized_added_ = has_normalized_added_ || t.normalized;
    table[static_cast<uint8_t>(pattern[0])].push_back(static_cast<uint32_t>(i));
  }
  for (auto* tables : {&by_first_raw_, &by_first_norm_}) {
    for (auto& bucket : *tables) {
      std::stable_sort(bucket.begin(), bucket.end(), [&](uint32_t a, uint32_t b) {
        return patterns_[a].size() > patterns_[b].size();
      });
    }
  }
  if (p.types.empty()) {
    for (size_t id = 0; id < model_.pieces().size(); ++id) {
      if (model_.options().byte_fallback && byte_fallback_value(pieces_[id]) >= 0) types_[id] = TokenType::kByte;
    }
    if (unk_id_ >= 0 && static_cast<size_t>(unk_id_) < types_.size()) types_[unk_id_] = TokenType::kUnknown;
  }
  build_decode_table();
}

void Tokenizer::build_decode_table() {
  const size_t n = pieces_.size();
  decoded_off_.assign(n + 1, 0);
  first_off_.assign(n + 1, 0);
  byte_token_.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    const std::string& piece = pieces_[id];
    decoded_off_[id] = static_cast<uint32_t>(decoded_.size());
    first_off_[id] = static_cast<uint32_t>(first_decoded_.size());
    const int byte = decoder_.byte_fallback ? byte_fallback_value(piece) : -1;
    if (decoder_.kind == DecoderSpec::Kind::kByteLevel) {
      append_byte_level(piece, decoded_);
    } else if (decoder_.kind == DecoderSpec::Kind::kNone) {
      decoded_.append(piece);
    } else if (byte >= 0) {
      byte_token_[id] = static_cast<uint16_t>(0x100 | byte);
      decoded_.push_back(static_cast<char>(byte));
    } else {
      replace_into(piece, decoder_.replace_from, decoder_.replace_to, decoded_);
      if (decoder_.strip == DecoderSpec::Strip::kFirstTokenReplacement) {
        replace_into(piece, decoder_.replace_from, "", first_decoded_);
      }
    }
  }
  decoded_off_[n] = static_cast<uint32_t>(decoded_.size());
  first_off_[n] = static_cast<uint32_t>(first_decoded_.size());
}

// HF AddedVocabulary::find_matches: leftmost-longest matches, scanning on
// after each raw match; single_word may discard a match; lstrip/rstrip widen it.
void Tokenizer::split_added(std::string_view text, bool normalized_set, std::vector<Segment>& out) const {
  out.clear();
  const auto n = static_cast<uint32_t>(text.size());
  const auto& table = normalized_set ? by_first_norm_ : by_first_raw_;
  uint32_t start_offset = 0;
  for (uint32_t pos = 0; pos < n;) {
    const auto& bucket = table[static_cast<uint8_t>(text[pos])];
    const AddedToken* hit = nullptr;
    size_t len = 0;
    for (uint32_t i : bucket) {
      if (text.substr(pos, patterns_[i].size()) == patterns_[i]) {
        hit = &added_[i];
        len = patterns_[i].size();
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    uint32_t start = pos, stop = pos + static_cast<uint32_t>(len);
    pos = stop;
    if (hit->single_word) {
      const bool start_space = start == 0 || !(class_before(text, start) & unicode::kWordBit);
      const bool stop_space = stop == n || !(class_at(text, stop) & unicode::kWordBit);
      if (!start_space || !stop_space) continue;
    }
    if (hit->lstrip) start = std::max(static_cast<uint32_t>(space_run_start(text, start)), start_offset);
    if (hit->rstrip) stop = static_cast<uint32_t>(space_run_end(text, stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, hit->id});
    start_offset = stop;
  }
  if (start_offset < n) out.push_back({start_offset, n, -1});
}

void Tokenizer::encode_piece(std::string_view piece, bool at_origin, Scratch& s,
                             std::vector<int32_t>& out) const {
  if (metaspace_) {
    metaspace_->apply(piece, at_origin, s.meta);
    metaspace_->words(s.meta, s.spans);
    for (const Span& w : s.spans) {
      model_.encode_chars(std::string_view(s.meta).substr(w.first, w.second - w.first), s.bpe, out);
    }
    return;
  }
  pre_.split(piece, s.spans, s.spans2);
  for (const Span& w : s.spans) {
    const std::string_view word = piece.substr(w.first, w.second - w.first);
    if (byte_level_) model_.encode_bytes(word, s.bpe, out);
    else model_.encode_chars(word, s.bpe, out);
  }
}

// A stretch of input between raw added tokens: normalize, then split out the
// normalized added tokens, then pre-tokenize and run BPE.
void Tokenizer::encode_text(std::string_view text, bool at_origin, Scratch& s,
                            std::vector<int32_t>& out) const {
  std::string_view norm = text;
  if (!normalizer_.empty()) {
    normalizer_.apply(text, s.normalized);
    norm = s.normalized;
  }
  if (!has_normalized_added_) {
    encode_piece(norm, at_origin, s, out);
    return;
  }
  split_added(norm, true, s.inner);
  for (const Segment& seg : s.inner) {  // encode_piece does not touch s.inner
    if (seg.id >= 0) out.push_back(seg.id);
    else encode_piece(norm.substr(seg.begin, seg.end - seg.begin), at_origin && seg.begin == 0, s, out);
  }
}

void Tokenizer::encode_into(std::string_view text, bool add_special, std::vector<int32_t>& out) const {
  if (add_special && add_bos_ && bos_id_ >= 0) out.push_back(bos_id_);
  Scratch s;
  split_added(text, false, s.segments);
  for (const Segment& seg : s.segments) {
    if (seg.id >= 0) out.push_back(seg.id);
    else encode_text(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, s, out);
  }
  if (add_special && add_eos_ && eos_id_ >= 0) out.push_back(eos_id_);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  encode_into(text, add_special, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw, group;
  raw.reserve(ids.size() * 4);
  bool first = true;
  auto flush_group = [&] {
    if (group.empty()) return;
    if (utf8::is_valid(group)) raw += group;
    else for (size_t i = 0; i < group.size(); ++i) raw += kReplacementUtf8;
    group.clear();
  };
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || pieces_[id].empty()) continue;
    if (skip_special && special_[id]) continue;
    if (decoder_.kind == DecoderSpec::Kind::kNone) {
      if (!first) raw += ' ';
    } else if (byte_token_[id]) {
      group.push_back(static_cast<char>(byte_token_[id] & 0xFF));
      first = false;
      continue;
    }
    flush_group();
    raw += first ? first_token_bytes(id) : token_bytes(id);
    first = false;
  }
  flush_group();
  std::string text;
  if (decoder_.kind == DecoderSpec::Kind::kByteLevel) utf8::append_lossy(text, raw);
  else text = std::move(raw);
  if (decoder_.strip == DecoderSpec::Strip::kLeadingSpace && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

std::string_view Tokenizer::piece(int32_t id) const {
  return id >= 0 && id < vocab_size() ? std::string_view(pieces_[id]) : std::string_view();
}

std::optional<int32_t> Tokenizer::token_id(std::string_view piece) const {
  for (const AddedToken& t : added_) {
    if (t.id >= 0 && pieces_[t.id] == piece) return t.id;
  }
  const int32_t id = model_.find(piece);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < vocab_size() && special_[id]; }

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size() && (special_[id] || types_[id] == TokenType::kControl);
}

TokenType Tokenizer::token_type(int32_t id) const {
  return id >= 0 && id < vocab_size() ? types_[id] : TokenType::kUnused;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return std::string_view(decoded_).substr(decoded_off_[id], decoded_off_[id + 1] - decoded_off_[id]);
}

std::string_view Tokenizer::first_token_bytes(int32_t id) const {
  if (decoder_.strip != DecoderSpec::Strip::kFirstTokenReplacement || id < 0 || id >= vocab_size() ||
      byte_token_[id]) {
    return token_bytes(id);
  }
  return std::string_view(first_decoded_).substr(first_off_[id], first_off_[id + 1] - first_off_[id]);
}

uint32_t Tokenizer::byte_token(int32_t id) const {
  return id >= 0 && id < vocab_size() ? byte_token_[id] : 0;
}

// ---------------------------------------------------------------- loaders

namespace {

using simdjson::dom::element;

bool json_bool(const element& obj, const char* key, bool fallback) {
  bool v = fallback;
  return obj[key].get(v) == simdjson::SUCCESS ? v : fallback;
}

Result<std::vector<AddedToken>> parse_added_tokens(const element& doc) {
  std::vector<AddedToken> out;
  simdjson::dom::array arr;
  if (doc["added_tokens"].get(arr) != simdjson::SUCCESS) return out;
  for (element item : arr) {
    AddedToken t;
    int64_t id = -1;
    std::string_view content;
    if (item["id"].get(id) != simdjson::SUCCESS || id < 0 || item["content"].get(content) != simdjson::SUCCESS) {
      return make_error("added_tokens entry without id/content");
    }
    t.id = static_cast<int32_t>(id);
    t.content = std::string(content);
    t.special = json_bool(item, "special", false);
    t.lstrip = json_bool(item, "lstrip", false);
    t.rstrip = json_bool(item, "rstrip", false);
    t.single_word = json_bool(item, "single_word", false);
    t.normalized = json_bool(item, "normalized", !t.special);
    out.push_back(std::move(t));
  }
  return out;
}

// The special ids a TemplateProcessing adds around a single sequence.
Result<void> parse_post_processor(const element& json, TokenizerParts& parts) {
  if (json.is_null()) return {};
  std::string_view type;
  if (json["type"].get(type) != simdjson::SUCCESS) return make_error("post_processor without a \"type\"");
  if (type == "ByteLevel") return {};
  if (type == "Sequence") {
    simdjson::dom::array items;
    if (json["processors"].get(items) != simdjson::SUCCESS) return make_error("post_processor Sequence without processors");
    for (element item : items) {
      Result<void> r = parse_post_processor(item, parts);
      if (!r) return r;
    }
    return {};
  }
  if (type != "TemplateProcessing") return make_error("unsupported post_processor \"" + std::string(type) + "\"");
  simdjson::dom::array single;
  if (json["single"].get(single) != simdjson::SUCCESS) return make_error("TemplateProcessing without \"single\"");
  bool seen_sequence = false;
  for (element item : single) {
    std::string_view name;
    if (item["Sequence"].error() == simdjson::SUCCESS) {
      seen_sequence = true;
      continue;
    }
    if (item["SpecialToken"]["id"].get(name) != simdjson::SUCCESS) return make_error("TemplateProcessing: bad item");
    simdjson::dom::array ids;
    int64_t id = -1;
    if (json["special_tokens"][name]["ids"].get(ids) != simdjson::SUCCESS || ids.size() != 1 ||
        ids.at(0).get(id) != simdjson::SUCCESS) {
      return make_error("TemplateProcessing: special token \"" + std::string(name) + "\" must map to one id");
    }
    int32_t& slot = seen_sequence ? parts.eos_id : parts.bos_id;
    bool& flag = seen_sequence ? parts.add_eos : parts.add_bos;
    if (flag) return make_error("TemplateProcessing: more than one special token on a side is not supported");
    slot = static_cast<int32_t>(id);
    flag = true;
  }
  return {};
}

Result<TokenizerParts> parts_from_json(const element& doc) {
  TokenizerParts parts;
  element model_json;
  if (doc["model"].get(model_json) != simdjson::SUCCESS) return make_error("tokenizer.json without \"model\"");
  Result<BpeModel> model = BpeModel::from_json(model_json);
  if (!model) return model.error();
  parts.model = std::move(*model);
  parts.unk_id = parts.model.options().unk_id;
  element pre, norm;
  if (doc["normalizer"].get(norm) == simdjson::SUCCESS) {
    Result<TextNormalizer> n = TextNormalizer::from_json(norm);
    if (!n) return n.error();
    parts.normalizer = std::move(*n);
  }
  std::string_view pre_type;
  if (doc["pre_tokenizer"].get(pre) == simdjson::SUCCESS && pre["type"].get(pre_type) == simdjson::SUCCESS &&
      pre_type == "Metaspace") {
    Result<Metaspace> m = Metaspace::from_json(pre);
    if (!m) return m.error();
    parts.metaspace = std::move(*m);
  } else if (std::string_view split; pre_type == "Split" && pre["pattern"]["String"].get(split) == simdjson::SUCCESS &&
                                      parts.normalizer.removes(split)) {
    // Gemma: Split(" ") after a normalizer that turned every " " into U+2581
    // splits nothing (whatever its behavior): no pre-tokenization.
  } else if (doc["pre_tokenizer"].error() == simdjson::SUCCESS) {
    Result<PreTokenizer> p = PreTokenizer::from_json(pre);
    if (!p) return p.error();
    parts.byte_level = p->byte_level();
    parts.pre = std::move(*p);
  }
  parts.kind = parts.byte_level ? TokenizerKind::kByteLevelBpe : TokenizerKind::kSentencePieceBpe;
  Result<std::vector<AddedToken>> added = parse_added_tokens(doc);
  if (!added) return added.error();
  parts.added = std::move(*added);
  element dec, post;
  if (doc["decoder"].get(dec) == simdjson::SUCCESS) {
    Result<DecoderSpec> d = DecoderSpec::from_json(dec);
    if (!d) return d.error();
    parts.decoder = std::move(*d);
  } else {
    parts.decoder.kind = DecoderSpec::Kind::kNone;
  }
  if (doc["post_processor"].get(post) == simdjson::SUCCESS) {
    Result<void> r = parse_post_processor(post, parts);
    if (!r) return r.error();
  }
  return parts;
}

Result<TokenizerParts> parts_from_json_file(const std::string& path) {
  simdjson::dom::parser parser;
  auto loaded = load_json_file(path, parser);  // integers beyond 64 bits read as floats
  if (!loaded) return loaded.error();
  const element doc = *loaded;
  Result<TokenizerParts> parts = parts_from_json(doc);
  if (!parts) return make_error(path + ": " + parts.error().message);
  return parts;
}

// tokenizer_config.json: add_bos_token / add_eos_token and the named special tokens.
Result<void> apply_tokenizer_config(const std::string& path, TokenizerParts& parts) {
  simdjson::dom::parser parser;
  auto loaded = load_json_file(path, parser);  // integers beyond 64 bits read as floats
  if (!loaded) return loaded.error();
  const element doc = *loaded;
  parts.add_bos = json_bool(doc, "add_bos_token", parts.add_bos);
  parts.add_eos = json_bool(doc, "add_eos_token", parts.add_eos);
  auto lookup = [&](std::string_view content) -> int32_t {
    for (const AddedToken& t : parts.added) {
      if (t.content == content) return t.id;
    }
    return parts.model.find(content);
  };
  for (auto [key, slot] : {std::pair{"bos_token", &parts.bos_id}, {"eos_token", &parts.eos_id},
                           {"unk_token", &parts.unk_id}, {"pad_token", &parts.pad_id}}) {
    std::string_view content;
    if (doc[key].get(content) != simdjson::SUCCESS && doc[key]["content"].get(content) != simdjson::SUCCESS) continue;
    const int32_t id = lookup(content);
    if (id < 0) return make_error(path + ": " + key + " \"" + std::string(content) + "\" is not in the vocabulary");
    *slot = id;
  }
  return {};
}

std::shared_ptr<const Tokenizer> make(TokenizerParts parts) {
  return std::make_shared<const Tokenizer>(std::move(parts));
}

Result<void> gguf_read_vocab(const GgufFile& g, GgufVocab& v) {
  Result<std::vector<std::string>> tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return tokens.error();
  v.tokens = std::move(*tokens);
  if (g.find("tokenizer.ggml.token_type")) {
    Result<std::vector<int64_t>> t = g.get_int_array("tokenizer.ggml.token_type");
    if (!t) return t.error();
    v.types = std::move(*t);
  }
  if (g.find("tokenizer.ggml.scores")) {
    Result<std::vector<float>> s = g.get_float_array("tokenizer.ggml.scores");
    if (!s) return s.error();
    v.scores = std::move(*s);
  }
  if (g.find("tokenizer.ggml.merges")) {
    Result<std::vector<std::string>> m = g.get_string_array("tokenizer.ggml.merges");
    if (!m) return m.error();
    v.merges = std::move(*m);
    v.has_merges = true;
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_gguf(const GgufFile& gguf) {
  Result<std::string> type = gguf.get_string("tokenizer.ggml.model");
  if (!type) return type.error();
  GgufVocab v;
  if (Result<void> r = gguf_read_vocab(gguf, v); !r) return r.error();
  TokenizerParts parts;
  Result<void> built = *type == "gpt2"    ? gguf_byte_level_parts(gguf, v, parts)
                       : *type == "llama" ? gguf_sentencepiece_parts(gguf, v, parts)
                                          : Result<void>(make_error("GGUF tokenizer.ggml.model \"" + *type +
                                                                    "\" is not supported (gpt2, llama)"));
  if (!built) return make_error(gguf.path() + ": " + built.error().message);
  const auto n = static_cast<int64_t>(v.tokens.size());
  auto id_of = [&](const char* key) -> int32_t {
    if (!gguf.find(key)) return -1;
    Result<int64_t> id = gguf.get_int(key);
    return id && *id >= 0 && *id < n ? static_cast<int32_t>(*id) : -1;
  };
  parts.bos_id = id_of("tokenizer.ggml.bos_token_id");
  parts.eos_id = id_of("tokenizer.ggml.eos_token_id");
  parts.unk_id = id_of("tokenizer.ggml.unknown_token_id");
  parts.pad_id = id_of("tokenizer.ggml.padding_token_id");
  // llama.cpp and transformers add BOS to a SentencePiece vocabulary unless told otherwise.
  parts.add_bos = parts.kind == TokenizerKind::kSentencePieceBpe;
  if (gguf.find("tokenizer.ggml.add_bos_token")) {
    if (Result<bool> b = gguf.get_bool("tokenizer.ggml.add_bos_token"); b) parts.add_bos = *b;
  }
  if (gguf.find("tokenizer.ggml.add_eos_token")) {
    if (Result<bool> b = gguf.get_bool("tokenizer.ggml.add_eos_token"); b) parts.add_eos = *b;
  }
  // The named special tokens are special added tokens (transformers registers them).
  for (int32_t id : {parts.bos_id, parts.eos_id, parts.unk_id, parts.pad_id}) {
    if (id < 0) continue;
    const bool listed =
        std::any_of(parts.added.begin(), parts.added.end(), [&](const AddedToken& t) { return t.id == id; });
    if (!listed) parts.added.push_back({parts.model.pieces()[id], id, true, false, false, false, false});
  }
  for (int64_t t : v.types) parts.types.push_back(static_cast<TokenType>(std::clamp<int64_t>(t, 1, 6)));
  if (parts.add_bos && parts.bos_id < 0) parts.add_bos = false;
  return make(std::move(parts));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_tokenizer_json(const std::string& path) {
  Result<TokenizerParts> parts = parts_from_json_file(path);
  if (!parts) return parts.error();
  return make(std::move(*parts));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_sentencepiece_model(const std::string& path) {
  Result<SentencePieceModel> spm = SentencePieceModel::load(path);
  if (!spm) return spm.error();
  Result<TokenizerParts> parts = sentencepiece_parts(*spm);
  if (!parts) return make_error(path + ": " + parts.error().message);
  return make(std::move(*parts));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path json = fs::path(dir) / "tokenizer.json", spm = fs::path(dir) / "tokenizer.model";
  Result<TokenizerParts> parts = make_error("");
  if (fs::exists(json)) {
    parts = parts_from_json_file(json.string());
  } else if (fs::exists(spm)) {
    Result<SentencePieceModel> model = SentencePieceModel::load(spm.string());
    if (!model) return model.error();
    parts = sentencepiece_parts(*model);
  } else {
    return make_error(dir + ": neither tokenizer.json nor tokenizer.model found");
  }
  if (!parts) return parts.error();
  const fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(config)) {
    Result<void> r = apply_tokenizer_config(config.string(), *parts);
    if (!r) return r.error();
  }
  return make(std::move(*parts));
}

}  // namespace pagoda::model
