#include "actors/draft_runner.hpp"

#include <algorithm>
#include <cstring>

#include "model/model_text.hpp"

namespace pagoda::actors {

Result<void> check_same_vocabulary(const std::string& draft_path, const std::string& target_path) {
  auto draft = model::load_model_text(draft_path);
  if (!draft) return make_error("draft model " + draft_path + ": " + draft.error().message);
  auto target = model::load_model_text(target_path);
  if (!target) return make_error("target model " + target_path + ": " + target.error().message);
  const model::Tokenizer& a = *draft->tokenizer;
  const model::Tokenizer& b = *target->tokenizer;
  const std::string both = "the draft model " + draft_path + " and the target model " + target_path;
  if (a.vocab_size() != b.vocab_size()) {
    return make_error(both + " have different vocabularies (" + std::to_string(a.vocab_size()) +
                      " vs " + std::to_string(b.vocab_size()) + " tokens): a draft model must "
                      "share the target's tokenizer");
  }
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    if (a.piece(id) != b.piece(id)) {
      return make_error(both + " have different vocabularies (token " + std::to_string(id) +
                        " is '" + std::string(a.piece(id)) + "' vs '" + std::string(b.piece(id)) +
                        "'): a draft model must share the target's tokenizer");
    }
  }
  return {};
}

Result<std::unique_ptr<DraftRunner>> DraftRunner::create(const DraftRunnerOptions& o,
                                                         gpu::Backend& backend,
                                                         const model::ModelConfig& target) {
  std::unique_ptr<DraftRunner> r(new DraftRunner());
  r->backend_ = &backend;
  model::LoadOptions lo = o.load;
  lo.max_num_batched_tokens = o.max_num_batched_tokens;
  lo.max_num_seqs = o.max_num_seqs;
  lo.max_logits_rows = o.max_num_seqs;
  lo.max_model_len = o.max_model_len;
  lo.allow_long_max_model_len = true;  // drafts past the draft's trained context are only worse
  lo.step_graphs = false;              // batches of every shape; eager launches
  lo.progress = nullptr;
  auto m = model::LlamaModel::load(o.model_path, backend, lo);
  if (!m) return make_error("draft model " + o.model_path + ": " + m.error().message);
  r->model_ = std::move(m).value();
  if (r->model_->config().vocab_size != target.vocab_size) {
    return make_error("the draft model " + o.model_path + " and the target model " + o.target_path +
                      " have different vocabularies (" +
                      std::to_string(r->model_->config().vocab_size) + " vs " +
                      std::to_string(target.vocab_size) +
                      " tokens): a draft model must share the target's tokenizer");
  }
  if (auto ok = check_same_vocabulary(o.model_path, o.target_path); !ok) return ok.error();
  if (auto ok = r->make_pool(o); !ok) return ok.error();
  return r;
}

// The KV pool, its table rows and free list, the sampling buffers.
Result<void> DraftRunner::make_pool(const DraftRunnerOptions& o) {
  gpu::Backend& backend = *backend_;
  const gpu::KvCacheSpec spec = model_->kv_cache_spec();
  auto cache = o.num_blocks > 0        ? backend.create_kv_cache(spec, o.num_blocks)
               : o.kv_cache_bytes > 0 ? backend.create_kv_cache_for_budget(spec, o.kv_cache_bytes)
                                      : backend.create_kv_cache(spec, std::max(o.target_blocks, 1));
  if (!cache) return make_error("draft KV pool: " + cache.error().message);
  cache_ = std::move(cache).value();
  max_tokens_ = o.max_num_batched_tokens;
  max_rows_ = o.max_num_seqs;
  max_model_len_ = model_->limits().max_model_len;
  const int32_t width = (max_model_len_ + block_size() - 1) / block_size();
  auto tables = model::BlockTableArena::create(backend, 2 * o.max_num_seqs + 8, width, num_blocks());
  if (!tables) return tables.error();
  tables_.emplace(std::move(tables).value());
  for (int32_t b = num_blocks() - 1; b >= 0; --b) free_.push_back(b);
  auto rows = backend.allocate(size_t(max_rows_) * sizeof(gpu::SamplingRowParams));
  if (!rows) return rows.error();
  rows_dev_ = std::move(rows).value();
  auto out = backend.allocate(size_t(max_rows_) * 8);  // tokens [R] | logprobs [R]
  if (!out) return out.error();
  out_dev_ = std::move(out).value();
  return {};
}

Result<DraftRunner::SeqState*> DraftRunner::state(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it != seqs_.end()) return &it->second;
  auto row = tables_->acquire();
  if (!row) return row.error();
  SeqState st;
  st.row = *row;
  return &seqs_.emplace(seq, std::move(st)).first->second;
}

// Blocks for the first `positions` positions; false when the pool is short.
bool DraftRunner::reserve(SeqState& st, int32_t positions) {
  const size_t need = size_t((positions + block_size() - 1) / block_size());
  if (need <= st.blocks.size()) return true;
  if (need - st.blocks.size() > free_.size()) return false;
  const int32_t from = int32_t(st.blocks.size());
  while (st.blocks.size() < need) {
    st.blocks.push_back(free_.back());
    free_.pop_back();
  }
  auto ok = tables_->assign(st.row, from, std::span<const int32_t>(st.blocks).subspan(size_t(from)));
  return bool(ok);
}

void DraftRunner::truncate(uint64_t seq, int32_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it != seqs_.end()) it->second.cached = std::min(it->second.cached, std::max(num_tokens, 0));
}

void DraftRunner::release(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  free_.insert(free_.end(), it->second.blocks.begin(), it->second.blocks.end());
  tables_->release(it->second.row);
  seqs_.erase(it);
}

void DraftRunner::clear() {
  while (!seqs_.empty()) release(seqs_.begin()->first);
}

Result<void> DraftRunner::propose(std::span<DraftRow> rows) {
  std::vector<Cursor> cur(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    DraftRow& r = rows[i];
    const int32_t k = int32_t(r.drafts.size());
    const int32_t end = int32_t(r.history.size());  // P + 1
    auto st = state(r.seq);
    // The last draft is never fed: positions [0, P + k) are written.
    if (!st || end + k - 1 > max_model_len_ || !reserve(**st, end + k - 1)) {
      if (st) release(r.seq);
      cur[i].made = k;  // no model drafts: the caller's fillers stay
      continue;
    }
    cur[i].st = *st;
    cur[i].st->cached = std::min(cur[i].st->cached, end - 1);  // at least the last token is fed
    cur[i].pos = cur[i].st->cached;
  }
  for (;;) {
    auto more = round(rows, cur);
    if (!more) {
      for (size_t i = 0; i < rows.size(); ++i) release(rows[i].seq);  // K/V state unknown
      return more.error();
    }
    if (!*more) break;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (cur[i].st != nullptr) cur[i].st->cached = cur[i].pos;
  }
  return {};
}

// Each row not done feeds its next chunk: catch-up ids up to P (logits only
// when the chunk reaches P), or its last draft.
Result<bool> DraftRunner::round(std::span<DraftRow> rows, std::vector<Cursor>& cur) {
  batch_.clear(1);
  logits_of_.clear();
  int32_t budget = max_tokens_;
  size_t total = 0;
  for (size_t i = 0; i < rows.size(); ++i) total += rows[i].history.size();
  chunk_.clear();
  chunk_.reserve(total + rows.size());  // spans into chunk_ stay valid below
  for (size_t i = 0; i < rows.size() && budget > 0; ++i) {
    Cursor& c = cur[i];
    const DraftRow& r = rows[i];
    if (c.st == nullptr || c.made >= int32_t(r.drafts.size())) continue;
    const int32_t end = int32_t(r.history.size());
    const size_t at = chunk_.size();
    if (c.pos < end) {
      const int32_t n = std::min(end - c.pos, budget);
      chunk_.insert(chunk_.end(), r.history.begin() + c.pos, r.history.begin() + c.pos + n);
    } else {
      chunk_.push_back(r.drafts[size_t(c.made - 1)]);
    }
    const int32_t n = int32_t(chunk_.size() - at);
    const bool logits = c.pos + n >= end;
    batch_.add_sequence_row(std::span<const int32_t>(chunk_).subspan(at), c.pos, c.st->row, *tables_,
                            block_size(), logits);
    if (logits) logits_of_.push_back(int32_t(i));
    c.pos += n;
    budget -= n;
  }
  if (batch_.num_tokens() == 0) return false;
  if (auto ok = tables_->sync(*backend_); !ok) return ok.error();
  auto logits = model_->forward_device(batch_, cache_);
  if (!logits) return logits.error();
  if (!logits_of_.empty()) {
    if (auto ok = draw(rows, cur, *logits); !ok) return ok.error();
  }
  return true;
}

// Draws d[made] for each row with logits, with the target row's parameters
// (no history spans, bans, biases, masks or top candidates).
Result<void> DraftRunner::draw(std::span<DraftRow> rows, std::vector<Cursor>& cur, const float* logits) {
  rows_.clear();
  for (int32_t i : logits_of_) {
    const Cursor& c = cur[size_t(i)];
    gpu::SamplingRowParams p = rows[size_t(i)].params[size_t(c.made)];
    p.repetition_penalty = 1.0f;
    p.presence_penalty = p.frequency_penalty = 0.0f;
    p.prompt_len = p.output_len = p.banned_len = p.bias_len = p.mask_words = 0;
    p.num_top_logprobs = 0;
    rows_.push_back(p);
  }
  const int32_t R = int32_t(rows_.size());
  if (auto ok = backend_->upload(rows_dev_, 0, rows_.data(), rows_.size() * sizeof rows_[0]); !ok) {
    return ok;
  }
  gpu::SamplingParams sp;
  sp.logits = logits;
  sp.rows = rows_dev_.as<const gpu::SamplingRowParams>();
  sp.num_rows = R;
  sp.vocab_size = config().vocab_size;
  sp.tokens = out_dev_.as<int32_t>();
  sp.logprobs = reinterpret_cast<float*>(out_dev_.as<uint8_t>() + size_t(max_rows_) * 4);
  sp.top_tokens = nullptr;
  sp.top_logprobs = nullptr;
  backend_->sample(sp);
  drawn_.resize(size_t(R));
  if (auto ok = backend_->download(out_dev_, 0, drawn_.data(), size_t(R) * 4); !ok) return ok;
  for (int32_t j = 0; j < R; ++j) {
    Cursor& c = cur[size_t(logits_of_[size_t(j)])];
    const int32_t id = drawn_[size_t(j)];
    rows[size_t(logits_of_[size_t(j)])].drafts[size_t(c.made)] =
        id >= 0 && id < config().vocab_size ? id : 0;
    ++c.made;
  }
  return {};
}

}  // namespace pagoda::actors
