// ForwardBatch: one step's flattened batch, as the engine (or the simple
// generator) builds it on the host and LlamaModel::forward consumes it.
//
// T token rows hold the new tokens of S sequences back to back: sequence s
// owns rows [query_start_loc[s], query_start_loc[s+1]); rows from
// query_start_loc[S] to T are padding (token 0, position 0, slot -1: they
// write nothing to the cache, read nothing from it, and their attention
// output is zero). A
// sequence's rows are a prefill chunk (several rows) or a decode token (one
// row); chunks and decodes mix freely.
//   token_ids[t], positions[t]: the token and its position in its sequence
//     (the i-th of the q_len rows of s is at context_lens[s] - q_len + i).
//   slot_mapping[t]: the cache slot (block * block_size + offset) that
//     receives row t's K/V; -1 for padding.
//   context_lens[s]: tokens of s in the cache after this step's write.
//   block_tables[s * max_blocks_per_seq + b]: physical block of logical block
//     b of s; entries past ceil(context_lens[s] / block_size) are never read.
//   logits_rows[r]: the row whose logits go to output row r (usually the last
//     row of each sequence that needs a next token).
// Two ways to give the block tables:
//   dense (add_sequence): block_tables holds a copy of every sequence's
//     table, [S, max_blocks_per_seq], uploaded with each step;
//   arena (add_sequence_row): the tables live in a BlockTableArena
//     (model/block_table_arena.hpp) and table_rows[s] names the arena row of
//     sequence s; block_tables stays empty and a step costs O(T + S) on the
//     host. The arena must be sync()ed before the forward and must outlive it.
//   A batch uses one mode and (arena mode) one arena.
// Plain data, no invariants enforced here: LlamaModel::forward validates what
// it relies on (sizes, ranges, consistency with the cache) and rejects a bad
// batch with an Error before touching the cache. Not thread-safe (a value).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/block_table_arena.hpp"

namespace pagoda::model {

struct ForwardBatch {
  std::vector<int32_t> token_ids;        // [T]
  std::vector<int32_t> positions;        // [T]
  std::vector<int64_t> slot_mapping;     // [T]
  std::vector<int32_t> query_start_loc;  // [S + 1], [0] == 0
  std::vector<int32_t> context_lens;     // [S]
  std::vector<int32_t> block_tables;     // [S, max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_rows;      // [R], each in [0, T)
  const BlockTableArena* arena = nullptr;  // arena mode when set (not owned)
  std::vector<int32_t> table_rows;         // [S] arena rows (arena mode only)

  int32_t num_tokens() const { return int32_t(token_ids.size()); }
  int32_t num_seqs() const { return int32_t(context_lens.size()); }
  int32_t num_logits_rows() const { return int32_t(logits_rows.size()); }

  // Empties the batch (either mode) and fixes the dense block-table width for
  // the next add_sequence calls (ignored in arena mode).
  void clear(int32_t blocks_per_seq = 0) {
    token_ids.clear();
    positions.clear();
    slot_mapping.clear();
    query_start_loc.assign(1, 0);
    context_lens.clear();
    block_tables.clear();
    logits_rows.clear();
    max_blocks_per_seq = blocks_per_seq;
    arena = nullptr;
    table_rows.clear();
  }

  // Appends one sequence's new tokens. `num_cached` tokens of it are already
  // in the cache; the new ones get positions num_cached.. and their slots
  // from `block_table` (physical block ids of its logical blocks; it must
  // cover num_cached + new_tokens.size() tokens and have at most
  // max_blocks_per_seq entries; unused table entries are padded with
  // `pad_block`). With `want_logits`, the last new row is added to
  // logits_rows; with `all_logits`, every new row is. Requires clear() first
  // and no padding rows added yet.
  void add_sequence(std::span<const int32_t> new_tokens, int32_t num_cached,
                    std::span<const int32_t> block_table, int32_t block_size,
                    bool want_logits = true, bool all_logits = false, int32_t pad_block = 0) {
    const int32_t first_row = num_tokens();
    for (size_t i = 0; i < new_tokens.size(); ++i) {
      const int32_t pos = num_cached + int32_t(i);
      token_ids.push_back(new_tokens[i]);
      positions.push_back(pos);
      const int32_t block = block_table[size_t(pos / block_size)];
      slot_mapping.push_back(int64_t(block) * block_size + pos % block_size);
      if (all_logits) logits_rows.push_back(first_row + int32_t(i));
    }
    if (want_logits && !all_logits && !new_tokens.empty()) logits_rows.push_back(num_tokens() - 1);
    query_start_loc.push_back(num_tokens());
    context_lens.push_back(num_cached + int32_t(new_tokens.size()));
    for (int32_t b = 0; b < max_blocks_per_seq; ++b) {
      block_tables.push_back(size_t(b) < block_table.size() ? block_table[size_t(b)] : pad_block);
    }
  }

  // Arena mode: appends one sequence whose table is row `row` of `table`
  // (acquired, its entries covering num_cached + new_tokens.size() tokens);
  // slots come from the arena's host row, block_tables stays empty. O(new
  // tokens). A row that does not cover them gets slot -1 (and a second arena
  // in one batch gets row -1), which RunState::stage rejects. Logits as in
  // add_sequence. Requires clear() first and no padding rows added yet.
  void add_sequence_row(std::span<const int32_t> new_tokens, int32_t num_cached, int32_t row,
                        const BlockTableArena& table, int32_t block_size, bool want_logits = true,
                        bool all_logits = false) {
    if (arena != nullptr && arena != &table) row = -1;
    arena = &table;
    const std::span<const int32_t> blocks = table.host_row(row);
    const int32_t first_row = num_tokens();
    for (size_t i = 0; i < new_tokens.size(); ++i) {
      const int32_t pos = num_cached + int32_t(i);
      token_ids.push_back(new_tokens[i]);
      positions.push_back(pos);
      const size_t b = size_t(pos / block_size);
      slot_mapping.push_back(b < blocks.size()
                                 ? int64_t(blocks[b]) * block_size + pos % block_size
                                 : -1);
      if (all_logits) logits_rows.push_back(first_row + int32_t(i));
    }
    if (want_logits && !all_logits && !new_tokens.empty()) logits_rows.push_back(num_tokens() - 1);
    query_start_loc.push_back(num_tokens());
    context_lens.push_back(num_cached + int32_t(new_tokens.size()));
    table_rows.push_back(row);
  }

  // Appends n padding rows (after the last sequence).
  void add_padding(int32_t n) {
    for (int32_t i = 0; i < n; ++i) {
      token_ids.push_back(0);
      positions.push_back(0);
      slot_mapping.push_back(-1);
    }
  }
};

}  // namespace pagoda::model
