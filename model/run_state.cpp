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

MetaLayout meta_layout(int64_t T, int64_t S, int64_t MB, int64_t R) {
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
  m.tables = take(S * MB, 4);
  m.rows = take(R, 4);
  at = (at + 7) / 8 * 8;
  m.slots = take(T, 8);
  m.bytes = at;
  return m;
}

std::string row_error(const char* what, int64_t index, const std::string& problem) {
  return std::string("forward batch: ") + what + "[" + std::to_string(index) + "] " + problem;
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
  const MetaLayout ml = meta_layout(T, limits.max_seqs, limits.max_blocks_per_seq, R);
  struct Want {
    gpu::DeviceBuffer* buf;
    size_t bytes;
    const char* name;
  };
  const Want wants[] = {
      {&rs.residual_, size_t(T * H) * 4, "residual"}, {&rs.delta_, size_t(T * H) * 4, "delta"},
      {&rs.normed_, size_t(T * H) * 4, "normed"},     {&rs.wide_, size_t(T * wide) * 4, "wide"},
      {&rs.mid_, size_t(T * mid) * 4, "mid"},         {&rs.gathered_, size_t(R * H) * 4, "gathered"},
      {&rs.logits_, size_t(R * c.vocab_size) * 4, "logits"}, {&rs.meta_, ml.bytes, "metadata"}};
  for (const Want& w : wants) {
    auto buf = backend.allocate(w.bytes);
    if (!buf) return make_error(std::string("run state: ") + w.name + ": " + buf.error().message);
    *w.buf = std::move(buf).value();
    rs.device_bytes_ += w.bytes;
  }
  rs.host_meta_.resize(ml.bytes);
  return rs;
}

Result<void> RunState::check(const ForwardBatch& b, const gpu::KvCache& cache) const {
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
  if (b.max_blocks_per_seq < 1 || b.max_blocks_per_seq > limits_.max_blocks_per_seq ||
      b.block_tables.size() != size_t(S) * size_t(b.max_blocks_per_seq)) {
    return make_error("forward batch: block_tables must be [S, max_blocks_per_seq] with 1 <= "
                      "max_blocks_per_seq <= " + std::to_string(limits_.max_blocks_per_seq));
  }
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
  for (int32_t s = 0; s < S; ++s) {
    if (auto ok = check_sequence(b, s, cache); !ok) return ok;
  }
  return {};
}

// Sequence s: its rows, context length, the blocks it reads and the slots it writes.
Result<void> RunState::check_sequence(const ForwardBatch& b, int32_t s,
                                      const gpu::KvCache& cache) const {
  const int32_t begin = b.query_start_loc[size_t(s)], end = b.query_start_loc[size_t(s) + 1];
  const int32_t ctx = b.context_lens[size_t(s)], q_len = end - begin, bs = limits_.block_size;
  if (q_len < 1) return make_error(row_error("query_start_loc", s, "gives no rows"));
  if (ctx < q_len || ctx > limits_.max_model_len ||
      int64_t(ctx) > int64_t(b.max_blocks_per_seq) * bs) {
    return make_error(row_error("context_lens", s, "= " + std::to_string(ctx) +
                                                       " is below its rows or above the limits"));
  }
  const int32_t* table = b.block_tables.data() + size_t(s) * size_t(b.max_blocks_per_seq);
  for (int32_t blk = 0; blk < (ctx + bs - 1) / bs; ++blk) {
    if (table[blk] < 0 || table[blk] >= cache.num_blocks()) {
      return make_error(row_error("block_tables", int64_t(s) * b.max_blocks_per_seq + blk,
                                  "= " + std::to_string(table[blk]) + " is not a cache block"));
    }
  }
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
  if (auto ok = check(b, cache); !ok) return ok.error();
  const int32_t T = b.num_tokens(), S = b.num_seqs(), R = b.num_logits_rows();
  const MetaLayout ml = meta_layout(T, S, b.max_blocks_per_seq, R);
  uint8_t* h = host_meta_.data();
  auto put = [h](size_t off, const auto& v) {
    std::memcpy(h + off, v.data(), v.size() * sizeof(v[0]));
  };
  put(ml.ids, b.token_ids);
  put(ml.positions, b.positions);
  put(ml.qsl, b.query_start_loc);
  put(ml.ctx, b.context_lens);
  put(ml.tables, b.block_tables);
  put(ml.rows, b.logits_rows);
  put(ml.slots, b.slot_mapping);
  if (auto up = backend.upload(meta_, 0, h, ml.bytes); !up) return up.error();
  const auto* d = meta_.as<const uint8_t>();
  StagedStep st;
  st.token_ids = reinterpret_cast<const int32_t*>(d + ml.ids);
  st.positions = reinterpret_cast<const int32_t*>(d + ml.positions);
  st.slot_mapping = reinterpret_cast<const int64_t*>(d + ml.slots);
  st.logits_rows = reinterpret_cast<const int32_t*>(d + ml.rows);
  st.num_logits_rows = R;
  st.meta.num_tokens = T;
  st.meta.num_seqs = S;
  st.meta.query_start_loc = reinterpret_cast<const int32_t*>(d + ml.qsl);
  st.meta.context_lens = reinterpret_cast<const int32_t*>(d + ml.ctx);
  st.meta.block_tables = reinterpret_cast<const int32_t*>(d + ml.tables);
  st.meta.max_blocks_per_seq = b.max_blocks_per_seq;
  st.meta.max_context_len = *std::max_element(b.context_lens.begin(), b.context_lens.end());
  return st;
}

}  // namespace pagoda::model
