// Indirect block-table rows (AttentionMetadata::block_table_rows) for the
// attention tests, CPU and CUDA alike: a Problem's dense [S, max_blocks]
// table spread over a wider, taller table (as a persistent per-sequence table
// looks), sequence s at a shuffled row. Every entry no sequence uses (the
// unused rows, the extra columns, the problem's own padded entries) holds the
// problem's NaN block, so a kernel that ignored the indirection or read past a
// row's blocks would produce NaN or another sequence's keys, never the dense
// result. Needs no CUDA header.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "tests/attention_problem.hpp"

namespace pagoda::gpu::test {

struct IndirectTables {
  std::vector<int32_t> tables;  // [num_rows, width]
  std::vector<int32_t> rows;    // [S]: the row of sequence s
  int32_t width = 0;
};

// 2S + 3 rows of max_blocks + 3 entries; rows drawn without repetition.
inline IndirectTables indirect_tables(const Problem& p, uint32_t seed) {
  const size_t S = p.seqs.size();
  const int32_t nan_block = p.tables[size_t(p.max_blocks) - 1];  // every row ends padded
  IndirectTables it;
  it.width = p.max_blocks + 3;
  const size_t num_rows = 2 * S + 3;
  it.tables.assign(num_rows * size_t(it.width), nan_block);
  std::vector<int32_t> order(num_rows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (size_t s = 0; s < S; ++s) {
    it.rows.push_back(order[s]);
    std::copy_n(&p.tables[s * size_t(p.max_blocks)], p.max_blocks,
                &it.tables[size_t(order[s]) * size_t(it.width)]);
  }
  return it;
}

// run_attention (tests/attention_problem.hpp) with the tables of `it`.
inline std::vector<float> run_attention_rows(Backend& be, const Problem& p,
                                             const IndirectTables& it, KvDtype dtype,
                                             int partition) {
  DeviceBuffer q = put(be, p.q), tables = put(be, it.tables), rows = put(be, it.rows),
               qsl = put(be, p.qsl), ctx = put(be, p.ctx),
               out = put(be, std::vector<float>(p.q.size(), kNaN));
  DeviceBuffer kc, vc;
  if (dtype == KvDtype::kF32) {
    kc = put(be, p.kc);
    vc = put(be, p.vc);
  } else {
    kc = put(be, to_bf16(p.kc));
    vc = put(be, to_bf16(p.vc));
  }
  const AttentionIo io{q.as<const float>(),     kc.data(),
                       vc.data(),               tables.as<const int32_t>(),
                       qsl.as<const int32_t>(), ctx.as<const int32_t>(),
                       out.as<float>()};
  PagedAttentionParams a = attention_params(p, io, dtype, partition);
  a.meta.max_blocks_per_seq = it.width;
  a.meta.block_table_rows = rows.as<const int32_t>();
  be.paged_attention(a);
  return get<float>(be, out, p.q.size());
}

}  // namespace pagoda::gpu::test
