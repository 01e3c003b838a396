#include "model/spm_tokenizer.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>

#include "model/gguf_file.hpp"
#include "model/sentencepiece_model.hpp"
#include "model/tokenizer.hpp"

namespace pagoda::model {
namespace {

size_t count_chars(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

void replace_all(std::string_view in, std::string_view pattern, std::string_view content,
                 std::string& out) {
  out.clear();
  if (pattern.empty()) {
    out.assign(in);
    return;
  }
  size_t pos = 0;
  for (size_t hit; (hit = in.find(pattern, pos)) != std::string_view::npos; pos = hit + pattern.size()) {
    out.append(in.substr(pos, hit - pos)).append(content);
  }
  out.append(in.substr(pos));
}

}  // namespace

Result<Metaspace> Metaspace::from_json(const simdjson::dom::element& json) {
  Metaspace m;
  std::string_view replacement, scheme;
  if (json["replacement"].get(replacement) == simdjson::SUCCESS) m.replacement = std::string(replacement);
  if (json["prepend_scheme"].get(scheme) == simdjson::SUCCESS) {
    if (scheme == "always") m.prepend = PrependScheme::kAlways;
    else if (scheme == "first") m.prepend = PrependScheme::kFirst;
    else if (scheme == "never") m.prepend = PrependScheme::kNever;
    else return make_error("Metaspace: unknown prepend_scheme \"" + std::string(scheme) + "\"");
  } else {
    bool add_prefix_space = true;
    if (json["add_prefix_space"].get(add_prefix_space) != simdjson::SUCCESS) add_prefix_space = true;
    m.prepend = add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  bool split = true;  // the HF default
  if (json["split"].get(split) != simdjson::SUCCESS) split = true;
  m.split = split;
  if (m.replacement.empty()) return make_error("Metaspace: empty replacement");
  return m;
}

void Metaspace::apply(std::string_view piece, bool at_origin, std::string& out) const {
  replace_all(piece, " ", replacement, out);
  const bool starts = std::string_view(out).substr(0, replacement.size()) == replacement;
  const bool prepend_here = prepend == PrependScheme::kAlways || (prepend == PrependScheme::kFirst && at_origin);
  if (prepend_here && !starts) out.insert(0, replacement);
}

void Metaspace::words(std::string_view normalized, std::vector<Span>& out) const {
  out.clear();
  const auto n = static_cast<uint32_t>(normalized.size());
  if (n == 0) return;
  if (!split) {
    out.emplace_back(0, n);
    return;
  }
  uint32_t start = 0;
  for (size_t hit = normalized.find(replacement, 1); hit != std::string_view::npos;
       hit = normalized.find(replacement, hit + replacement.size())) {
    if (hit > start) out.emplace_back(start, static_cast<uint32_t>(hit));
    start = static_cast<uint32_t>(hit);
  }
  out.emplace_back(start, n);
}

namespace {

Result<void> parse_normalizer(const simdjson::dom::element& json, std::vector<TextNormalizer::Op>& ops) {
  std::string_view type;
  if (json["type"].get(type) != simdjson::SUCCESS) return make_error("normalizer without a \"type\"");
  if (type == "Sequence") {
    simdjson::dom::array items;
    if (json["normalizers"].get(items) != simdjson::SUCCESS) {
      return make_error("normalizer Sequence without \"normalizers\"");
    }
    for (simdjson::dom::element item : items) {
      Result<void> r = parse_normalizer(item, ops);
      if (!r) return r;
    }
    return {};
  }
  if (type == "Prepend") {
    std::string_view content;
    if (json["prepend"].get(content) != simdjson::SUCCESS) return make_error("Prepend without \"prepend\"");
    ops.push_back({true, "", std::string(content)});
    return {};
  }
  if (type == "Replace") {
    std::string_view pattern, content;
    if (json["pattern"]["String"].get(pattern) != simdjson::SUCCESS) {
      return make_error("normalizer Replace: only String patterns are supported");
    }
    if (json["content"].get(content) != simdjson::SUCCESS) return make_error("Replace without \"content\"");
    ops.push_back({false, std::string(pattern), std::string(content)});
    return {};
  }
  return make_error("unsupported normalizer type \"" + std::string(type) + "\"");
}

}  // namespace

Result<TextNormalizer> TextNormalizer::from_json(const simdjson::dom::element& json) {
  if (json.is_null()) return TextNormalizer();
  std::vector<Op> ops;
  Result<void> r = parse_normalizer(json, ops);
  if (!r) return r.error();
  return TextNormalizer(std::move(ops));
}

bool TextNormalizer::removes(std::string_view s) const {
  bool removed = false;
  for (const Op& op : ops_) {
    if (!op.prepend && op.pattern == s) removed = op.content.find(s) == std::string::npos;
    else if (op.content.find(s) != std::string::npos) removed = false;
  }
  return removed && !s.empty();
}

void TextNormalizer::apply(std::string_view in, std::string& out) const {
  out.assign(in);
  std::string tmp;
  for (const Op& op : ops_) {
    if (op.prepend) {
      if (!out.empty()) out.insert(0, op.content);
    } else {
      replace_all(out, op.pattern, op.content, tmp);
      out.swap(tmp);
    }
  }
}

namespace {

struct SpmMerge {
  int32_t left, right, merged;
  uint32_t len_left, len_right;  // in characters
  float score;
  uint32_t order;  // position of the merged piece in vocabulary order
};

}  // namespace

Result<BpeModel> build_spm_bpe(std::vector<std::string> pieces, const std::vector<float>& scores,
                               SpmMergeOrder order, const BpeOptions& options) {
  PieceMap vocab;
  vocab.reserve(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!pieces[id].empty()) vocab.insert_or_assign(pieces[id], static_cast<int32_t>(id));
  }
  auto lookup = [&](std::string_view p) {
    auto it = vocab.find(p);
    return it == vocab.end() ? -1 : it->second;
  };
  std::vector<SpmMerge> merges;
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string_view piece = pieces[id];
    if (piece.empty() || lookup(piece) != static_cast<int32_t>(id)) continue;  // duplicates: last id wins
    uint32_t left_chars = 0;
    const auto total = static_cast<uint32_t>(count_chars(piece));
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<uint8_t>(piece[cut]) & 0xC0) == 0x80) continue;  // not a character boundary
      ++left_chars;
      const int32_t l = lookup(piece.substr(0, cut)), r = lookup(piece.substr(cut));
      if (l < 0 || r < 0) continue;
      const float score = id < scores.size() ? scores[id] : 0.0f;
      merges.push_back({l, r, static_cast<int32_t>(id), left_chars, total - left_chars, score,
                        static_cast<uint32_t>(id)});
    }
  }
  if (order == SpmMergeOrder::kPieceId) {
    std::stable_sort(merges.begin(), merges.end(), [](const SpmMerge& a, const SpmMerge& b) {
      return a.merged != b.merged ? a.merged < b.merged : a.len_left < b.len_left;
    });
  } else {
    std::stable_sort(merges.begin(), merges.end(), [](const SpmMerge& a, const SpmMerge& b) {
      if (a.score != b.score) return a.score > b.score;
      if (a.len_left != b.len_left) return a.len_left > b.len_left;
      if (a.len_right != b.len_right) return a.len_right > b.len_right;
      return a.order < b.order;
    });
  }
  std::vector<std::array<int32_t, 3>> resolved;
  resolved.reserve(merges.size());
  for (const SpmMerge& m : merges) resolved.push_back({m.left, m.right, m.merged});
  return BpeModel::build_resolved(std::move(pieces), resolved, options);
}

// ---------------------------------------------------------------- loaders

// The SentencePiece model as transformers' LlamaTokenizer converts it.
Result<TokenizerParts> sentencepiece_parts(const SentencePieceModel& spm) {
  if (spm.model_type != SentencePieceModel::kBpe) {
    return make_error("only BPE SentencePiece models are supported (model_type " + std::to_string(spm.model_type) + ")");
  }
  TokenizerParts parts;
  parts.kind = TokenizerKind::kSentencePieceBpe;
  std::vector<std::string> pieces;
  for (const auto& p : spm.pieces) {
    pieces.push_back(p.piece);
    parts.types.push_back(static_cast<TokenType>(std::clamp(p.type, 1, 6)));
  }
  BpeOptions opt;  // LlamaTokenizer: byte_fallback, fuse_unk, no unk token in the BPE model
  opt.byte_fallback = true;
  opt.fuse_unk = true;
  Result<BpeModel> model = build_spm_bpe(std::move(pieces), {}, SpmMergeOrder::kPieceId, opt);
  if (!model) return model.error();
  parts.model = std::move(*model);
  parts.metaspace = Metaspace{std::string(kSpmSpace), PrependScheme::kFirst, false};
  parts.decoder = {DecoderSpec::Kind::kPieces, true, std::string(kSpmSpace), " ", DecoderSpec::Strip::kLeadingSpace};
  const int32_t n = static_cast<int32_t>(spm.pieces.size());
  auto valid = [&](int32_t id) { return id >= 0 && id < n ? id : -1; };
  parts.unk_id = valid(spm.unk_id);
  parts.bos_id = valid(spm.bos_id);
  parts.eos_id = valid(spm.eos_id);
  parts.pad_id = valid(spm.pad_id);
  parts.add_bos = parts.bos_id >= 0;
  for (int32_t id = 0; id < n; ++id) {
    const int32_t type = spm.pieces[id].type;
    const bool named = id == parts.unk_id || id == parts.bos_id || id == parts.eos_id;
    if (type == SentencePieceModel::kControl || type == SentencePieceModel::kUserDefined || named) {
      parts.added.push_back({spm.pieces[id].piece, id, type != SentencePieceModel::kUserDefined, false, false, false, false});
    }
  }
  return parts;
}

namespace {

// Python's str.isspace() for one code point (transformers tests tokens with
// t.strip()).
bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Gemma files store a token of spaces (a user-defined "\u2581\u2581" in the
// tokenizer.model) as real spaces; transformers' gemma_tokenizer spells every
// all-whitespace token holding a ' ' back as one U+2581 per character.
std::string gemma_respell(const std::string& token) {
  bool has_space = false;
  size_t chars = 0;
  for (size_t i = 0; i < token.size(); ++chars) {
    const auto b = static_cast<uint8_t>(token[i]);
    const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (i + len > token.size()) return token;
    uint32_t c = len == 1 ? b : b & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<uint8_t>(token[i + k]) & 0x3F);
    if (!py_space(c)) return token;
    has_space |= c == ' ';
    i += len;
  }
  if (!has_space) return token;
  std::string out;
  for (size_t k = 0; k < chars; ++k) out += kSpmSpace;
  return out;
}

bool is_gemma(const std::string& arch) { return arch == "gemma" || arch == "gemma2" || arch == "gemma3"; }

}  // namespace

// A "llama" GGUF vocabulary as transformers' GGUF path builds it: LlamaTokenizer
// for "llama" and the like, GemmaTokenizer for the gemma architectures (no
// prefix space, spaces become U+2581 in the normalizer, the decoder strips
// nothing, merges ranked by the merged token's position in the file).
Result<void> gguf_sentencepiece_parts(const GgufFile& g, const GgufVocab& v, TokenizerParts& parts) {
  std::string arch;
  if (Result<std::string> a = g.get_string("general.architecture"); a) arch = *a;
  if (arch == "phi3") return make_error("GGUF SentencePiece tokenizer of architecture phi3 is not supported");
  const bool gemma = is_gemma(arch);
  BpeOptions opt;
  opt.byte_fallback = true;
  opt.fuse_unk = true;
  std::vector<std::string> tokens = v.tokens;
  std::vector<float> scores = v.scores;
  if (gemma) {
    // Gemma's scores do not follow its merge order; the file order does.
    for (std::string& t : tokens) t = gemma_respell(t);
    scores.resize(tokens.size());
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  }
  Result<BpeModel> model = make_error("");
  if (v.has_merges) {
    std::vector<std::pair<std::string, std::string>> merges;
    for (const std::string& m : v.merges) {
      const size_t sp = m.find(' ');
      if (sp == std::string::npos) return make_error("GGUF merge \"" + m + "\" is not two tokens");
      merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
    model = BpeModel::build(tokens, merges, opt);
  } else {
    if (scores.size() != tokens.size()) return make_error("GGUF SentencePiece tokenizer without scores or merges");
    model = build_spm_bpe(tokens, scores, SpmMergeOrder::kScore, opt);
  }
  if (!model) return model.error();
  parts.model = std::move(*model);
  parts.kind = TokenizerKind::kSentencePieceBpe;
  if (gemma) {
    // GemmaTokenizer: Replace(' ', U+2581), no prefix; its Split(' ') pre-tokenizer
    // sees no spaces left, so the text is one word. tokenizer.ggml.add_space_prefix
    // (false in Gemma files) is not read by transformers either.
    parts.metaspace = Metaspace{std::string(kSpmSpace), PrependScheme::kNever, false};
    parts.decoder = {DecoderSpec::Kind::kPieces, true, std::string(kSpmSpace), " ", DecoderSpec::Strip::kNone};
  } else {
    // transformers' LlamaTokenizer ignores tokenizer.ggml.add_space_prefix: always "first".
    parts.metaspace = Metaspace{std::string(kSpmSpace), PrependScheme::kFirst, false};
    parts.decoder = {DecoderSpec::Kind::kPieces, true, std::string(kSpmSpace), " ",
                     DecoderSpec::Strip::kLeadingSpace};
  }
  // CONTROL tokens are special added tokens; USER_DEFINED ones plain added
  // tokens when the (respelled) vocabulary holds them as written.
  for (size_t i = 0; i < v.types.size() && i < v.tokens.size(); ++i) {
    const bool control = v.types[i] == 3;
    if (!control && v.types[i] != 4) continue;
    if (!control && parts.model.find(v.tokens[i]) < 0) continue;
    parts.added.push_back({v.tokens[i], int32_t(i), control, false, false, false, false});
  }
  return {};
}

}  // namespace pagoda::model
