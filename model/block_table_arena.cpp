#include "model/block_table_arena.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>

namespace pagoda::model {

namespace {

std::string row_error(int32_t row, const std::string& problem) {
  return "block table arena: row " + std::to_string(row) + " " + problem;
}

}  // namespace

Result<BlockTableArena> BlockTableArena::create(gpu::Backend& backend, int32_t rows,
                                                int32_t width, int32_t num_blocks) {
  if (rows <= 0 || width <= 0 || num_blocks <= 0) {
    return make_error("block table arena: rows (" + std::to_string(rows) + "), width (" +
                      std::to_string(width) + ") and num_blocks (" + std::to_string(num_blocks) +
                      ") must be > 0");
  }
  const size_t entries = size_t(rows) * size_t(width);
  auto buf = backend.allocate(entries * sizeof(int32_t));
  if (!buf) return make_error("block table arena: " + buf.error().message);
  BlockTableArena a;
  a.backend_ = &backend;
  a.table_ = std::move(buf).value();
  auto host = backend.allocate_pinned(entries * sizeof(int32_t));
  if (!host) return make_error("block table arena: " + host.error().message);
  a.host_buf_ = std::move(host).value();
  a.host_ = a.host_buf_.as<int32_t>();  // the memory stays put when the arena moves
  std::memset(a.host_, 0, entries * sizeof(int32_t));
  a.state_.resize(size_t(rows));
  a.free_.reserve(size_t(rows));
  for (int32_t r = rows - 1; r >= 0; --r) a.free_.push_back(r);  // row 0 first
  a.dirty_rows_.reserve(size_t(rows));
  a.rows_ = rows;
  a.width_ = width;
  a.num_blocks_ = num_blocks;
  return a;
}

Result<int32_t> BlockTableArena::acquire() {
  if (free_.empty()) {
    return make_error("block table arena: all " + std::to_string(rows_) + " rows are in use");
  }
  const int32_t row = free_.back();
  free_.pop_back();
  RowState& st = state_[size_t(row)];
  st.acquired = true;
  st.length = 0;
  return row;
}

void BlockTableArena::release(int32_t row) {
  assert(acquired(row));
  if (!acquired(row)) return;
  RowState& st = state_[size_t(row)];
  if (st.dirty_hi > st.dirty_lo) --pending_;
  st.acquired = false;
  st.length = 0;
  st.dirty_lo = st.dirty_hi = 0;  // stays listed; sync() skips it
  free_.push_back(row);
}

Result<void> BlockTableArena::assign(int32_t row, int32_t from, std::span<const int32_t> blocks) {
  if (!acquired(row)) return make_error(row_error(row, "is not an acquired row"));
  RowState& st = state_[size_t(row)];
  const int64_t n = int64_t(blocks.size());
  if (from < 0 || from > st.length) {
    return make_error(row_error(row, "has " + std::to_string(st.length) +
                                         " entries: setting from " + std::to_string(from) +
                                         " would leave a hole"));
  }
  if (int64_t(from) + n > width_) {
    return make_error(row_error(row, "entries [" + std::to_string(from) + ", " +
                                         std::to_string(int64_t(from) + n) +
                                         ") pass its width " + std::to_string(width_)));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (blocks[size_t(i)] < 0 || blocks[size_t(i)] >= num_blocks_) {
      return make_error(row_error(row, "entry " + std::to_string(from + i) + " = " +
                                           std::to_string(blocks[size_t(i)]) +
                                           " is not a block in [0, " +
                                           std::to_string(num_blocks_) + ")"));
    }
  }
  if (n == 0) return {};
  host_buf_.wait_writable();  // the mirror is the source of sync()'s queued uploads
  int32_t* dst = host_ + size_t(row) * size_t(width_) + size_t(from);
  std::memmove(dst, blocks.data(), size_t(n) * sizeof(int32_t));  // blocks may be a host_row
  const int32_t end = from + int32_t(n);
  st.length = std::max(st.length, end);
  if (st.dirty_hi > st.dirty_lo) {
    st.dirty_lo = std::min(st.dirty_lo, from);
    st.dirty_hi = std::max(st.dirty_hi, end);
  } else {
    st.dirty_lo = from;
    st.dirty_hi = end;
    ++pending_;
    if (!st.listed) {
      st.listed = true;
      dirty_rows_.push_back(row);
    }
  }
  return {};
}

void BlockTableArena::truncate(int32_t row, int32_t length) {
  if (!acquired(row) || length < 0) return;
  RowState& st = state_[size_t(row)];
  st.length = std::min(st.length, length);
}

int32_t BlockTableArena::length(int32_t row) const {
  return acquired(row) ? state_[size_t(row)].length : 0;
}

std::span<const int32_t> BlockTableArena::host_row(int32_t row) const {
  if (!acquired(row)) return {};
  return {host_ + size_t(row) * size_t(width_), size_t(state_[size_t(row)].length)};
}

bool BlockTableArena::acquired(int32_t row) const {
  return valid_row(row) && state_[size_t(row)].acquired;
}

Result<void> BlockTableArena::sync(gpu::Backend& backend) {
  if (&backend != backend_) {
    return make_error("block table arena: sync on a backend it was not created on");
  }
  while (!dirty_rows_.empty()) {
    const int32_t row = dirty_rows_.back();
    RowState& st = state_[size_t(row)];
    if (st.dirty_hi > st.dirty_lo) {
      const size_t first = size_t(row) * size_t(width_) + size_t(st.dirty_lo);
      const size_t bytes = size_t(st.dirty_hi - st.dirty_lo) * sizeof(int32_t);
      // Async: the next assign() waits for these uploads (the mirror's fence).
      auto up = backend.upload_async(table_, first * sizeof(int32_t), host_ + first, bytes);
      host_buf_.uploads_issued();  // also after a failure: earlier rows may be queued
      if (!up) return make_error("block table arena: sync: " + up.error().message);
      st.dirty_lo = st.dirty_hi = 0;
      --pending_;
    }
    st.listed = false;
    dirty_rows_.pop_back();
  }
  return {};
}

}  // namespace pagoda::model
