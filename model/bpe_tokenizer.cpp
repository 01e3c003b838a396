#include "model/bpe_tokenizer.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>

#include "model/gguf_file.hpp"
#include "model/tokenizer.hpp"
#include "model/utf8.hpp"

namespace pagoda::model {

char32_t byte_to_unicode(uint8_t b) {
  // Printable bytes keep their code point; the other 68 take 256, 257, ... in order.
  auto printable = [](unsigned c) {
    return (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  if (printable(b)) return b;
  char32_t next = 256;
  for (unsigned c = 0; c < b; ++c) {
    if (!printable(c)) ++next;
  }
  return next;
}

int unicode_to_byte(char32_t cp) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    for (unsigned b = 0; b < 256; ++b) t[byte_to_unicode(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

const std::array<std::string, 256>& byte_spellings() {
  static const std::array<std::string, 256> spellings = [] {
    std::array<std::string, 256> s;
    for (unsigned b = 0; b < 256; ++b) utf8::append(s[b], byte_to_unicode(static_cast<uint8_t>(b)));
    return s;
  }();
  return spellings;
}

namespace {

inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

inline uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

// Min-heap order on (rank, pos): "a after b" for std::push_heap's max-heap.
struct CandidateAfter {
  bool operator()(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

std::string byte_fallback_piece(unsigned b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

}  // namespace

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t left, int32_t right) const {
  if (merges_.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    const MergeSlot& slot = merges_[i];
    if (slot.key == key) return &slot;
    if (slot.new_id < 0) return nullptr;
  }
}

void BpeModel::insert_merge(int32_t left, int32_t right, uint32_t rank, int32_t new_id) {
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    MergeSlot& slot = merges_[i];
    if (slot.new_id < 0 || slot.key == key) {
      slot = {key, rank, new_id};
      return;
    }
  }
}

Result<BpeModel> BpeModel::build_resolved(std::vector<std::string> pieces,
                                          const std::vector<std::array<int32_t, 3>>& merges,
                                          const BpeOptions& options) {
  BpeModel m;
  m.options_ = options;
  m.pieces_ = std::move(pieces);
  m.vocab_.reserve(m.pieces_.size());
  for (size_t id = 0; id < m.pieces_.size(); ++id) {
    if (!m.pieces_[id].empty()) m.vocab_.insert_or_assign(m.pieces_[id], static_cast<int32_t>(id));
  }
  size_t cap = 16;
  while (cap < merges.size() * 2) cap <<= 1;
  m.merges_.assign(merges.empty() ? 0 : cap, MergeSlot{});
  m.merge_mask_ = cap - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& mg = merges[rank];
    m.insert_merge(mg[0], mg[1], static_cast<uint32_t>(rank), mg[2]);
  }
  const auto& spell = byte_spellings();
  for (unsigned b = 0; b < 256; ++b) {
    m.byte_ids_[b] = m.find(spell[b]);
    m.fallback_ids_[b] = m.find(byte_fallback_piece(b));
  }
  return m;
}

Result<BpeModel> BpeModel::build(std::vector<std::string> pieces,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 const BpeOptions& options) {
  PieceMap index;
  index.reserve(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!pieces[id].empty()) index.insert_or_assign(pieces[id], static_cast<int32_t>(id));
  }
  auto lookup = [&](std::string_view p) {
    auto it = index.find(p);
    return it == index.end() ? -1 : it->second;
  };
  std::vector<std::array<int32_t, 3>> resolved;
  resolved.reserve(merges.size());
  std::string joined;
  for (const auto& [left, right] : merges) {
    joined.assign(left).append(right);
    const int32_t l = lookup(left), r = lookup(right), n = lookup(joined);
    if (l < 0 || r < 0 || n < 0) {
      return make_error("BPE merge \"" + left + " " + right + "\": token \"" +
                        (l < 0 ? left : r < 0 ? right : joined) + "\" is not in the vocabulary");
    }
    resolved.push_back({l, r, n});
  }
  return build_resolved(std::move(pieces), resolved, options);
}

void BpeModel::push_symbol(BpeScratch& s, int32_t id, uint32_t len) const {
  const auto n = static_cast<int32_t>(s.symbols.size());
  if (n > 0) s.symbols.back().next = n;
  s.symbols.push_back({id, n - 1, -1, len});
}

// A character missing from the vocabulary: byte fallback when every byte has
// a <0xNN> token, else unk. As in HF, byte tokens go out before a pending
// (not yet flushed) unk.
void BpeModel::add_unknown(BpeScratch& s, std::string_view ch, int32_t& pending_unk,
                           uint32_t& pending_len) const {
  if (options_.byte_fallback) {
    bool all = true;
    for (char c : ch) all = all && fallback_ids_[static_cast<uint8_t>(c)] >= 0;
    if (all) {
      for (char c : ch) push_symbol(s, fallback_ids_[static_cast<uint8_t>(c)], 1);
      return;
    }
  }
  if (options_.unk_id < 0) return;  // no unk token: the character is dropped
  const auto len = static_cast<uint32_t>(ch.size());
  if (pending_unk >= 0 && options_.fuse_unk) {
    pending_len += len;
    return;
  }
  if (pending_unk >= 0) push_symbol(s, pending_unk, pending_len);
  pending_unk = options_.unk_id;
  pending_len = len;
}

void BpeModel::merge_all(BpeScratch& s) const {
  auto& sym = s.symbols;
  auto& heap = s.heap;
  heap.clear();
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    if (const MergeSlot* m = find_merge(sym[i].id, sym[i + 1].id)) {
      heap.push_back({m->rank, static_cast<uint32_t>(i), m->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), CandidateAfter{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandidateAfter{});
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& cur = sym[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    const BpeScratch::Symbol right = sym[cur.next];
    const MergeSlot* m = find_merge(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale candidate
    sym[cur.next].len = 0;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    if (right.next >= 0) sym[right.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const MergeSlot* pm = find_merge(sym[cur.prev].id, cur.id)) {
        heap.push_back({pm->rank, static_cast<uint32_t>(cur.prev), pm->new_id});
        std::push_heap(heap.begin(), heap.end(), CandidateAfter{});
      }
    }
    if (cur.next >= 0) {
      if (const MergeSlot* nm = find_merge(cur.id, sym[cur.next].id)) {
        heap.push_back({nm->rank, top.pos, nm->new_id});
        std::push_heap(heap.begin(), heap.end(), CandidateAfter{});
      }
    }
  }
}

void BpeModel::encode_bytes(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const auto& spell = byte_spellings();
  if (options_.ignore_merges) {
    s.mapped.clear();
    for (char c : word) s.mapped += spell[static_cast<uint8_t>(c)];
    if (int32_t id = find(s.mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  s.symbols.clear();
  int32_t pending_unk = -1;
  uint32_t pending_len = 0;
  for (char c : word) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      if (pending_unk >= 0) push_symbol(s, pending_unk, pending_len);
      pending_unk = -1;
      push_symbol(s, id, 1);
    } else {
      add_unknown(s, spell[static_cast<uint8_t>(c)], pending_unk, pending_len);
    }
  }
  if (pending_unk >= 0) push_symbol(s, pending_unk, pending_len);
  merge_all(s);
  for (const auto& sym : s.symbols) {
    if (sym.len != 0) out.push_back(sym.id);
  }
}

void BpeModel::encode_chars(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (int32_t id = find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  s.symbols.clear();
  int32_t pending_unk = -1;
  uint32_t pending_len = 0;
  const char* p = word.data();
  const char* end = p + word.size();
  while (p < end) {
    const utf8::Decoded d = utf8::decode(p, end);
    const std::string_view ch(p, d.len);
    p += d.len;
    const int32_t id = d.valid ? find(ch) : -1;
    if (id >= 0) {
      if (pending_unk >= 0) push_symbol(s, pending_unk, pending_len);
      pending_unk = -1;
      push_symbol(s, id, d.len);
    } else {
      add_unknown(s, ch, pending_unk, pending_len);
    }
  }
  if (pending_unk >= 0) push_symbol(s, pending_unk, pending_len);
  merge_all(s);
  for (const auto& sym : s.symbols) {
    if (sym.len != 0) out.push_back(sym.id);
  }
}

namespace {

Result<std::vector<std::pair<std::string, std::string>>> parse_merges(
    const simdjson::dom::element& model) {
  std::vector<std::pair<std::string, std::string>> merges;
  simdjson::dom::array arr;
  if (model["merges"].get(arr) != simdjson::SUCCESS) return merges;
  merges.reserve(arr.size());
  for (simdjson::dom::element item : arr) {
    std::string_view line;
    simdjson::dom::array pair;
    if (item.get(line) == simdjson::SUCCESS) {
      const size_t sp = line.find(' ');
      if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos) {
        return make_error("BPE merge \"" + std::string(line) + "\" is not two tokens");
      }
      merges.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
    } else if (item.get(pair) == simdjson::SUCCESS && pair.size() == 2) {
      std::string_view a, b;
      if (pair.at(0).get(a) != simdjson::SUCCESS || pair.at(1).get(b) != simdjson::SUCCESS) {
        return make_error("BPE merge entry is not a pair of strings");
      }
      merges.emplace_back(std::string(a), std::string(b));
    } else {
      return make_error("BPE merge entry is neither \"a b\" nor [a, b]");
    }
  }
  return merges;
}

bool empty_or_null(const simdjson::dom::element& model, const char* key) {
  simdjson::dom::element v;
  if (model[key].get(v) != simdjson::SUCCESS || v.is_null()) return true;
  std::string_view s;
  return v.get(s) == simdjson::SUCCESS && s.empty();
}

}  // namespace

Result<BpeModel> BpeModel::from_json(const simdjson::dom::element& model) {
  std::string_view type;
  if (model["type"].get(type) == simdjson::SUCCESS && type != "BPE") {
    return make_error("unsupported tokenizer model type \"" + std::string(type) + "\" (only BPE)");
  }
  double dropout = 0.0;
  if (model["dropout"].get(dropout) == simdjson::SUCCESS && dropout != 0.0) {
    return make_error("BPE dropout is not supported");
  }
  if (!empty_or_null(model, "continuing_subword_prefix") || !empty_or_null(model, "end_of_word_suffix")) {
    return make_error("BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  simdjson::dom::object vocab;
  if (model["vocab"].get(vocab) != simdjson::SUCCESS) return make_error("BPE model without a vocab object");
  std::vector<std::string> pieces;
  for (auto [key, value] : vocab) {
    int64_t id = -1;
    if (value.get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 30)) {
      return make_error("BPE vocab entry \"" + std::string(key) + "\" has a bad id");
    }
    if (static_cast<size_t>(id) >= pieces.size()) pieces.resize(id + 1);
    pieces[id] = std::string(key);
  }
  auto merges = parse_merges(model);
  if (!merges) return merges.error();
  BpeOptions opt;
  std::string_view unk;
  if (model["unk_token"].get(unk) == simdjson::SUCCESS) {
    for (size_t id = 0; id < pieces.size(); ++id) {
      if (pieces[id] == unk) opt.unk_id = static_cast<int32_t>(id);
    }
  }
  auto flag = [&](const char* key) {
    bool v = false;
    return model[key].get(v) == simdjson::SUCCESS && v;
  };
  opt.fuse_unk = flag("fuse_unk");
  opt.byte_fallback = flag("byte_fallback");
  opt.ignore_merges = flag("ignore_merges");
  return build(std::move(pieces), *merges, opt);
}

// ---------------------------------------------------------------- loaders

namespace {

// GGUF tokenizer.ggml.pre -> the split transformers uses (its
// GGUF_PRE_TOKENIZER_SPLITS; everything else keeps GPT2Tokenizer's ByteLevel
// regex). "smollm" is in the second group: transformers splits SmolLM2 GGUFs
// with the GPT-2 regex alone, while SmolLM2's own tokenizer.json (and
// llama.cpp) also isolate digits; this follows transformers.
Result<SplitPattern> gguf_split(std::string_view pre) {
  static constexpr std::string_view kLlama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
                                                 "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe"};
  static constexpr std::string_view kQwen2[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"};
  static constexpr std::string_view kGpt2[] = {"", "default", "gpt-2", "gpt2", "smollm"};
  for (auto name : kLlama3) if (pre == name) return SplitPattern::kLlama3;
  for (auto name : kQwen2) if (pre == name) return SplitPattern::kQwen2;
  for (auto name : kGpt2) if (pre == name) return SplitPattern::kGpt2;
  return make_error("GGUF tokenizer.ggml.pre \"" + std::string(pre) + "\" is not supported");
}


}  // namespace

// A "gpt2" GGUF vocabulary as transformers' GGUF path builds it.
Result<void> gguf_byte_level_parts(const GgufFile& g, const GgufVocab& v, TokenizerParts& parts) {
  std::string pre;
  if (g.find("tokenizer.ggml.pre")) {
    Result<std::string> r = g.get_string("tokenizer.ggml.pre");
    if (!r) return r.error();
    pre = *r;
  }
  Result<SplitPattern> split = gguf_split(pre);
  if (!split) return split.error();
  if (!v.has_merges) return make_error("GGUF byte-level tokenizer without tokenizer.ggml.merges");
  // Tokens written outside the byte alphabet are respelled byte by byte (as transformers does).
  auto in_alphabet = [&](std::string_view t) {
    for (const char* p = t.data(); p < t.data() + t.size();) {
      const utf8::Decoded d = utf8::decode(p, t.data() + t.size());
      if (!d.valid || unicode_to_byte(d.cp) < 0) return false;
      p += d.len;
    }
    return true;
  };
  std::vector<std::string> pieces;
  std::vector<uint8_t> spelled(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    spelled[i] = in_alphabet(v.tokens[i]);
    std::string piece;
    if (spelled[i]) piece = v.tokens[i];
    else for (char c : v.tokens[i]) piece += byte_spellings()[static_cast<uint8_t>(c)];
    pieces.push_back(std::move(piece));
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (const std::string& m : v.merges) {
    const size_t sp = m.find(' ');
    if (sp == std::string::npos) return make_error("GGUF merge \"" + m + "\" is not two tokens");
    merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  Result<BpeModel> model = BpeModel::build(pieces, merges, BpeOptions{});
  if (!model) return model.error();
  parts.model = std::move(*model);
  parts.kind = TokenizerKind::kByteLevelBpe;
  parts.byte_level = true;
  parts.pre = PreTokenizer({{PreTokenizer::Step::Kind::kSplit, *split, false}}, true);
  parts.decoder.kind = DecoderSpec::Kind::kByteLevel;
  for (size_t i = 0; i < v.types.size() && i < pieces.size(); ++i) {
    // Control tokens outside the byte alphabet are llama.cpp mislabels transformers skips.
    if (v.types[i] == 3 && spelled[i]) parts.added.push_back({pieces[i], int32_t(i), true, false, false, false, false});
    if (v.types[i] == 4) parts.added.push_back({pieces[i], int32_t(i), false, false, false, false, false});
  }
  return {};
}

}  // namespace pagoda::model
