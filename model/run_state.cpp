#include "model/run_state.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace pagoda::model {

namespace {

// Byte offsets of one step's metadata inside the packed buffer.
struct MetaLayout {
  size_t ids, positions, qsl, ctx, tables, rows, slots, bytes;
};

// `tables`: int32 entries of the table section (S * max_blocks_per_seq dense,
// S arena rows).
MetaLayout meta_layout(int64_t T, int64_t S, int64_t tables, int64_t R) {
  MetaLayout m{};
  size_t at = 0;
  auto take = [&at](int64_t count, size_t elem) {
    size_t off = at;
    at += size_t(count) * elem;
    return off;
  };
  m.ids = take(T, 4);
  m.positions = take(T, 4);
  m.qsl = take(S + 1, 4);
  m.ctx = take(S, 4);
  m.tables = take(tables, 4);
  m.rows = take(R, 4);
  at = (at + 7) / 8 * 8;
  m.slots = take(T, 8);
  m.bytes = at;
  return m;
}

std::string row_error(const char* what, int64_t index, const std::string& problem) {
  return std::string("forward batch: ") + what + "[" + std::to_string(index) + "] " + problem;
}

// The staged step's pointers into the metadata buffer d (layout ml, just
// uploaded from b).
StagedStep staged_step(const uint8_t* d, const ForwardBatch& b, const MetaLayout& ml) {
  auto i32 = [d](size_t off) { return reinterpret_cast<const int32_t*>(d + off); };
  StagedStep st;
  st.token_ids = i32(ml.ids);
  st.positions = i32(ml.positions);
  st.slot_mapping = reinterpret_cast<const int64_t*>(d + ml.slots);
  st.logits_rows = i32(ml.rows);
  st.num_logits_rows = b.num_logits_rows();
  st.meta.num_tokens = b.num_tokens();
  st.meta.num_seqs = b.num_seqs();
  st.meta.query_start_loc = i32(ml.qsl);
  st.meta.context_lens = i32(ml.ctx);
  if (b.arena) {
    st.meta.block_tables = b.arena->device();
    st.meta.max_blocks_per_seq = b.arena->width();
    st.meta.block_table_rows = i32(ml.tables);
  } else {
    st.meta.block_tables = i32(ml.tables);
    st.meta.max_blocks_per_seq = b.max_blocks_per_seq;
  }
  st.meta.max_context_len = *std::max_element(b.context_lens.begin(), b.context_lens.end());
  int32_t max_q = 0;
  for (size_t s = 0; s + 1 < b.query_start_loc.size(); ++s) {
    max_q = std::max(max_q, b.query_start_loc[s + 1] - b.query_start_loc[s]);
  }
  st.meta.max_query_len = max_q;
  return st;
}

// Copies v into h + off and fills the next `pad` entries with `fill`.
template <class V>
void put_padded(uint8_t* h, size_t off, const V& v, size_t pad, typename V::value_type fill) {
  auto* dst = reinterpret_cast<typename V::value_type*>(h + off);
  if (!v.empty()) std::memcpy(dst, v.data(), v.size() * sizeof(v[0]));  // data() may be null
  std::fill(dst + v.size(), dst + v.size() + pad, fill);
}

}  // namespace

Result<RunState> RunState::create(gpu::Backend& backend, const ModelConfig& c,
                                  const RunStateLimits& limits) {
  if (limits.max_tokens <= 0 || limits.max_seqs <= 0 || limits.max_blocks_per_seq <= 0 ||
      limits.max_logits_rows <= 0 || limits.block_size <= 0 || limits.max_model_len <= 0) {
    return make_error("run state: every limit must be > 0");
  }
  RunState rs;
  rs.limits_ = limits;
  rs.vocab_size_ = c.vocab_size;
  rs.num_layers_ = c.num_layers;
  rs.num_kv_heads_ = c.num_kv_heads;
  rs.head_dim_ = c.head_dim;
  const int64_t T = limits.max_tokens, R = limits.max_logits_rows, H = c.hidden_size;
  const int64_t q = int64_t(c.num_heads) * c.head_dim;
  const int64_t qkv = q + 2 * int64_t(c.num_kv_heads) * c.head_dim;
  const int64_t wide = std::max<int64_t>(qkv, 2 * int64_t(c.intermediate_size));
  const int64_t mid = std::max<int64_t>(q, c.intermediate_size);
  // max_blocks_per_seq >= 1, so the table section also holds S arena rows.
  const MetaLayout ml = meta_layout(T, limits.max_seqs,
                                    int64_t(limits.max_seqs) * limits.max_blocks_per_seq, R);
  struct Want {
    gpu::DeviceBuffer* buf;
    size_t bytes;
    const char* name;
  };
  const Want wants[] = {
      {&rs.residual_, size_t(T * H) * 4, "residual"}, {&rs.delta_, size_t(T * H) * 4, "delta"},
      {&rs.normed_, size_t(T * H) * 4, "normed"},     {&rs.wide_, size_t(T * wide) * 4, "wide"},
      {&rs.mid_, size_t(T * mid) * 4, "mid"},         {&rs.gathered_, size_t(R * H) * 4, "gathered"},
      {&rs.logits_, size_t(R * c.vocab_size) * 4, "logits"},
      {&rs.sets_[0].meta, ml.bytes, "metadata"}, {&rs.sets_[1].meta, ml.bytes, "metadata"}};
  for (const Want& w : wants) {
    auto buf = backend.allocate(w.bytes);
    if (!buf) return make_error(std::string("run state: ") + w.name + ": " + buf.error().message);
    *w.buf = std::move(buf).value();
    rs.device_bytes_ += w.bytes;
  }
  for (StagingSet& set : rs.sets_) {
    auto host = backend.allocate_pinned(ml.bytes);
    if (!host) return make_error("run state: metadata: " + host.error().message);
    set.host = std::move(host).value();
  }
  return rs;
}

RunState::StagingSet& RunState::take_set(int set) {
  StagingSet& s = sets_[set];
  s.host.wait_writable();  // the upload two steps back may still be queued
  last_set_ = set;
  return s;
}

Result<void> RunState::check(const gpu::Backend& backend, const ForwardBatch& b,
                             const gpu::KvCache& cache) const {
  if (auto ok = check_shape(b, cache); !ok) return ok;
  if (auto ok = b.arena ? check_arena(backend, b, cache) : check_dense(b); !ok) return ok;
  if (auto ok = check_rows(b); !ok) return ok;
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    auto ok = b.arena ? check_sequence_row(b, s) : check_sequence(b, s, cache);
    if (!ok) return ok;
  }
  return {};
}

// The cache's geometry, the batch's counts against the limits, the array sizes.
Result<void> RunState::check_shape(const ForwardBatch& b, const gpu::KvCache& cache) const {
  const gpu::KvCacheSpec& spec = cache.spec();
  if (spec.num_layers != num_layers_ || spec.num_kv_heads != num_kv_heads_ ||
      spec.head_dim != head_dim_ || spec.block_size != limits_.block_size) {
    return make_error("forward: the KV cache's geometry (layers " +
                      std::to_string(spec.num_layers) + ", kv heads " +
                      std::to_string(spec.num_kv_heads) + ", head_dim " +
                      std::to_string(spec.head_dim) + ", block_size " +
                      std::to_string(spec.block_size) + ") does not match the model's");
  }
  const int32_t T = b.num_tokens(), S = b.num_seqs(), R = b.num_logits_rows();
  if (T < 1 || T > limits_.max_tokens) {
    return make_error("forward batch: " + std::to_string(T) + " tokens, allowed 1.." +
                      std::to_string(limits_.max_tokens));
  }
  if (S < 1 || S > limits_.max_seqs) {
    return make_error("forward batch: " + std::to_string(S) + " sequences, allowed 1.." +
                      std::to_string(limits_.max_seqs));
  }
  if (R > limits_.max_logits_rows) {
    return make_error("forward batch: " + std::to_string(R) + " logits rows, allowed " +
                      std::to_string(limits_.max_logits_rows));
  }
  if (b.positions.size() != size_t(T) || b.slot_mapping.size() != size_t(T) ||
      b.query_start_loc.size() != size_t(S) + 1) {
    return make_error("forward batch: positions, slot_mapping must have T entries and "
                      "query_start_loc S + 1");
  }
  return {};
}

// Dense mode: block_tables is [S, max_blocks_per_seq] within the limits.
Result<void> RunState::check_dense(const ForwardBatch& b) const {
  const int32_t S = b.num_seqs();
  if (!b.table_rows.empty()) {
    return make_error("forward batch: table_rows without an arena (mixed modes)");
  }
  if (b.max_blocks_per_seq < 1 || b.max_blocks_per_seq > limits_.max_blocks_per_seq ||
      b.block_tables.size() != size_t(S) * size_t(b.max_blocks_per_seq)) {
    return make_error("forward batch: block_tables must be [S, max_blocks_per_seq] with 1 <= "
                      "max_blocks_per_seq <= " + std::to_string(limits_.max_blocks_per_seq));
  }
  return {};
}

// Arena mode: one row per sequence, a synced arena of this backend whose ids
// are all cache blocks (assign() checked each against arena.num_blocks()).
Result<void> RunState::check_arena(const gpu::Backend& backend, const ForwardBatch& b,
                                   const gpu::KvCache& cache) const {
  const BlockTableArena& a = *b.arena;
  if (!b.block_tables.empty()) {
    return make_error("forward batch: block_tables and an arena in one batch (mixed modes)");
  }
  if (b.table_rows.size() != size_t(b.num_seqs())) {
    return make_error("forward batch: table_rows must have S entries");
  }
  if (a.backend() != &backend) {
    return make_error("forward batch: the block table arena belongs to another backend");
  }
  if (a.dirty()) {
    return make_error("forward batch: the block table arena has changes not uploaded "
                      "(call sync() before forward)");
  }
  if (a.num_blocks() > cache.num_blocks()) {
    return make_error("forward batch: the block table arena allows " +
                      std::to_string(a.num_blocks()) + " blocks, the KV cache has " +
                      std::to_string(cache.num_blocks()));
  }
  return {};
}

// Row-level arrays: query_start_loc's ends, token ids, logits rows, padding.
Result<void> RunState::check_rows(const ForwardBatch& b) const {
  const int32_t T = b.num_tokens(), S = b.num_seqs(), R = b.num_logits_rows();
  if (b.query_start_loc[0] != 0 || b.query_start_loc[size_t(S)] > T) {
    return make_error("forward batch: query_start_loc must start at 0 and end at most at T");
  }
  for (int32_t t = 0; t < T; ++t) {
    if (b.token_ids[size_t(t)] < 0 || b.token_ids[size_t(t)] >= vocab_size_) {
      return make_error(row_error("token_ids", t, "= " + std::to_string(b.token_ids[size_t(t)]) +
                                                      " is outside the vocabulary"));
    }
  }
  for (int32_t r = 0; r < R; ++r) {
    if (b.logits_rows[size_t(r)] < 0 || b.logits_rows[size_t(r)] >= T) {
      return make_error(row_error("logits_rows", r, "is not a row of the batch"));
    }
  }
  for (int32_t t = b.query_start_loc[size_t(S)]; t < T; ++t) {
    if (b.slot_mapping[size_t(t)] != -1) {
      return make_error(row_error("slot_mapping", t, "is a padding row and must be -1"));
    }
  }
  return {};
}

// Sequence s's rows and context length; `table_tokens` is how many tokens its
// table covers.
Result<void> RunState::check_context(const ForwardBatch& b, int32_t s,
                                     int64_t table_tokens) const {
  const int32_t begin = b.query_start_loc[size_t(s)], end = b.query_start_loc[size_t(s) + 1];
  const int32_t ctx = b.context_lens[size_t(s)], q_len = end - begin;
  if (q_len < 1) return make_error(row_error("query_start_loc", s, "gives no rows"));
  if (ctx < q_len || ctx > limits_.max_model_len || int64_t(ctx) > table_tokens) {
    return make_error(row_error("context_lens", s, "= " + std::to_string(ctx) +
                                                       " is below its rows or above the limits"));
  }
  return {};
}

// Dense sequence s: its rows, context length, the blocks it reads and the slots it writes.
Result<void> RunState::check_sequence(const ForwardBatch& b, int32_t s,
                                      const gpu::KvCache& cache) const {
  const int32_t bs = limits_.block_size;
  if (auto ok = check_context(b, s, int64_t(b.max_blocks_per_seq) * bs); !ok) return ok;
  const int32_t ctx = b.context_lens[size_t(s)];
  const int32_t* table = b.block_tables.data() + size_t(s) * size_t(b.max_blocks_per_seq);
  for (int32_t blk = 0; blk < (ctx + bs - 1) / bs; ++blk) {
    if (table[blk] < 0 || table[blk] >= cache.num_blocks()) {
      return make_error(row_error("block_tables", int64_t(s) * b.max_blocks_per_seq + blk,
                                  "= " + std::to_string(table[blk]) + " is not a cache block"));
    }
  }
  return check_slots(b, s, table);
}

// Arena sequence s: an acquired row whose entries cover its context; O(its rows).
Result<void> RunState::check_sequence_row(const ForwardBatch& b, int32_t s) const {
  const int32_t row = b.table_rows[size_t(s)];
  if (!b.arena->acquired(row)) {
    return make_error(row_error("table_rows", s, "= " + std::to_string(row) +
                                                     " is not an acquired row of the arena"));
  }
  const int64_t covered = int64_t(b.arena->length(row)) * limits_.block_size;
  if (auto ok = check_context(b, s, covered); !ok) return ok;
  return check_slots(b, s, b.arena->host_row(row).data());
}

// Positions and slots of sequence s's rows against its table (host copy).
Result<void> RunState::check_slots(const ForwardBatch& b, int32_t s, const int32_t* table) const {
  const int32_t begin = b.query_start_loc[size_t(s)], end = b.query_start_loc[size_t(s) + 1];
  const int32_t ctx = b.context_lens[size_t(s)], q_len = end - begin, bs = limits_.block_size;
  for (int32_t t = begin; t < end; ++t) {
    const int32_t pos = ctx - q_len + (t - begin);
    if (b.positions[size_t(t)] != pos) {
      return make_error(row_error("positions", t, "should be " + std::to_string(pos)));
    }
    const int64_t slot = int64_t(table[pos / bs]) * bs + pos % bs;
    if (b.slot_mapping[size_t(t)] != slot) {
      return make_error(row_error("slot_mapping", t, "disagrees with the block table (" +
                                                         std::to_string(slot) + ")"));
    }
  }
  return {};
}

Result<StagedStep> RunState::stage(gpu::Backend& backend, const ForwardBatch& b,
                                   const gpu::KvCache& cache) {
  if (b.context_lens.empty() || b.token_ids.empty()) {
    return make_error("forward batch: empty (no sequences or no tokens)");
  }
  if (auto ok = check(backend, b, cache); !ok) return ok.error();
  const int32_t T = b.num_tokens(), S = b.num_seqs(), R = b.num_logits_rows();
  const std::vector<int32_t>& tables = b.arena ? b.table_rows : b.block_tables;
  const MetaLayout ml = meta_layout(T, S, int64_t(tables.size()), R);
  StagingSet& set = take_set((last_set_ + 1) % kStagingSets);
  uint8_t* h = set.host.as<uint8_t>();
  auto put = [h](size_t off, const auto& v) {  // an empty vector's data() may be null
    if (!v.empty()) std::memcpy(h + off, v.data(), v.size() * sizeof(v[0]));
  };
  put(ml.ids, b.token_ids);
  put(ml.positions, b.positions);
  put(ml.qsl, b.query_start_loc);
  put(ml.ctx, b.context_lens);
  put(ml.tables, tables);
  put(ml.rows, b.logits_rows);
  put(ml.slots, b.slot_mapping);
  // Queued before the forward's kernels; a step that samples nothing never
  // synchronizes, so the next stage() into this set waits for this upload
  // (its fence).
  auto up = backend.upload_async(set.meta, 0, h, ml.bytes);
  set.host.uploads_issued();  // also after a failure: part of it may be queued
  if (!up) return up.error();
  return staged_step(set.meta.as<const uint8_t>(), b, ml);
}


int32_t RunState::padded_limit() const {
  return std::min({limits_.max_tokens, limits_.max_seqs, limits_.max_logits_rows});
}

Result<StagedStep> RunState::stage_padded(gpu::Backend& backend, const ForwardBatch& b,
                                          const gpu::KvCache& cache, int32_t bucket,
                                          int32_t context_bound) {
  const int32_t T = b.num_tokens(), S = b.num_seqs(), R = b.num_logits_rows();
  if (b.arena == nullptr || T != S || R > S || S < 1 || bucket < S || bucket > padded_limit() ||
      context_bound > limits_.max_model_len) {
    return make_error("forward batch: not a decode step that fits a graph bucket");
  }
  if (auto ok = check(backend, b, cache); !ok) return ok.error();
  for (int32_t ctx : b.context_lens) {
    if (ctx > context_bound) return make_error("forward batch: context above the graph's bound");
  }
  const size_t B = size_t(bucket), pad = B - size_t(S);
  const MetaLayout ml = meta_layout(bucket, bucket, bucket, bucket);
  StagingSet& set = take_set(0);  // a graph replays set 0's pointers
  uint8_t* h = set.host.as<uint8_t>();
  put_padded(h, ml.ids, b.token_ids, pad, 0);
  put_padded(h, ml.positions, b.positions, pad, 0);
  put_padded(h, ml.qsl, b.query_start_loc, pad, b.query_start_loc.back());
  put_padded(h, ml.ctx, b.context_lens, pad, 0);
  put_padded(h, ml.tables, b.table_rows, pad, 0);
  put_padded(h, ml.rows, b.logits_rows, B - size_t(R), 0);
  put_padded(h, ml.slots, b.slot_mapping, pad, int64_t{-1});
  auto up = backend.upload_async(set.meta, 0, h, ml.bytes);
  set.host.uploads_issued();
  if (!up) return up.error();
  StagedStep st = staged_step(set.meta.as<const uint8_t>(), b, ml);
  st.num_logits_rows = bucket;
  st.meta.num_tokens = bucket;
  st.meta.num_seqs = bucket;
  st.meta.max_context_len = context_bound;
  st.meta.max_query_len = 1;
  return st;
}

}  // namespace pagoda::model
