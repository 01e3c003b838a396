// BlockTableArena: persistent block tables in backend memory, one row per
// running sequence, so that a step uploads only the entries that changed
// (a new block, a copy-on-write replacement) instead of every sequence's
// whole table. The attention kernels read it through
// gpu::AttentionMetadata::block_table_rows (ForwardBatch's arena mode).
//
// Layout: device() is [rows, width] int32, row-major; entry (r, b) is the
// physical KV block of logical block b of the sequence holding row r. A host
// mirror holds the same values (host_row), so that the host can compute slot
// mappings and validate a batch without reading device memory.
//
// Contract:
//  - A row is acquire()d for one sequence and release()d when it ends. Its
//    entries [0, length) are set (by assign) and each is a block id in
//    [0, num_blocks); entries past length are never read by a valid batch and
//    may hold anything (a released row keeps its stale device contents).
//  - assign() changes only the host mirror and records the changed range as
//    dirty; sync() uploads the dirty ranges. Callers must sync() after their
//    last assign() and before the forward that reads the rows (RunState::stage
//    rejects a batch while dirty() is true). Cost: acquire/release O(1),
//    assign O(n), sync O(dirty entries + dirty rows): one upload per dirty row
//    covering [lowest, highest) changed entry of that row.
//  - On CUDA, sync()'s uploads are stream-ordered after every op issued
//    before, so a step still running reads the old values. They read the
//    host mirror when the stream reaches them, so the next assign() first
//    waits for them (the pinned mirror's UploadFence: at once when they are
//    done, as they are after a step that synchronized).
//
// Ownership: owns its device buffer (must not outlive the Backend it was
// created on; sync() needs that same Backend) and its host mirror. Move-only.
// Thread: the executor thread only (not thread-safe).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/result.hpp"

namespace pagoda::model {

class BlockTableArena {
 public:
  // rows, width, num_blocks > 0. Allocates rows * width int32 on `backend`.
  static Result<BlockTableArena> create(gpu::Backend& backend, int32_t rows, int32_t width,
                                        int32_t num_blocks);

  BlockTableArena(BlockTableArena&&) noexcept = default;
  BlockTableArena& operator=(BlockTableArena&&) noexcept = default;

  // A free row (length 0), or an Error when every row is taken. Rows are
  // reused last-released first.
  Result<int32_t> acquire();
  // Gives an acquired row back (its length drops to 0, pending changes are
  // dropped). A row that is not acquired is ignored (asserts in debug builds).
  void release(int32_t row);

  // Sets entries [from, from + blocks.size()) of an acquired row. Requires
  // from <= length(row) (no holes), from + n <= width and every id in
  // [0, num_blocks); otherwise an Error and nothing changes. The row's length
  // becomes max(length, from + n). O(n).
  Result<void> assign(int32_t row, int32_t from, std::span<const int32_t> blocks);

  // Shortens an acquired row to `length` entries (a longer length, or a row
  // that is not acquired: nothing changes). O(1); nothing is uploaded (the
  // entries past the length are never read).
  void truncate(int32_t row, int32_t length);

  // Entries set in `row` (0 for a row that is not acquired or out of range).
  int32_t length(int32_t row) const;
  // The host mirror of the row's entries [0, length(row)); empty for a row that
  // is not acquired or out of range. Valid until the next assign/release.
  std::span<const int32_t> host_row(int32_t row) const;
  bool acquired(int32_t row) const;

  // Uploads every dirty range to device memory (see the contract). On an
  // Error (upload failure, another backend) the ranges stay dirty.
  Result<void> sync(gpu::Backend& backend);
  // True while some assign() has not been synced.
  bool dirty() const { return pending_ > 0; }

  const int32_t* device() const { return table_.as<const int32_t>(); }  // [rows, width]
  const gpu::Backend* backend() const { return backend_; }
  int32_t rows() const { return rows_; }
  int32_t width() const { return width_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t free_rows() const { return int32_t(free_.size()); }

 private:
  BlockTableArena() = default;
  bool valid_row(int32_t row) const { return row >= 0 && row < rows_; }

  // Per row: entries set, the dirty range [lo, hi) (hi == 0: clean), whether
  // it is acquired and whether it is listed in dirty_rows_.
  struct RowState {
    int32_t length = 0;
    int32_t dirty_lo = 0, dirty_hi = 0;
    bool acquired = false;
    bool listed = false;
  };

  gpu::Backend* backend_ = nullptr;
  gpu::DeviceBuffer table_;          // [rows, width] int32
  gpu::PinnedBuffer host_buf_;       // [rows, width], the mirror (pinned: async uploads)
  int32_t* host_ = nullptr;          // host_buf_'s data
  std::vector<RowState> state_;      // [rows]
  std::vector<int32_t> free_;        // free rows, next acquire() at the back
  std::vector<int32_t> dirty_rows_;  // rows listed for sync (their range may be dropped)
  int32_t pending_ = 0;              // rows with a non-empty dirty range
  int32_t rows_ = 0, width_ = 0, num_blocks_ = 0;
};

}  // namespace pagoda::model
