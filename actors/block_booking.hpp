// BlockBooking: the one message per step between the scheduler and the block
// manager (the block-manager actor answers a BookingRequest with a
// BookingReply), and BlockBooker, the plain-C++ core that answers it.
//
// The scheduler decides; the booker books (nano-vllm's split, across actors):
//   - the scheduler lists, in its priority order, every running group and
//     what each live sequence computes this step (known tokens: a prefill
//     chunk or the last sampled token; pending: placeholders for the token
//     the step in flight samples), then FCFS waiting candidates, the token
//     budget left for admissions and the sequence limit;
//   - the booker applies the prelude (commits of tokens learned since the
//     last booking, rollbacks of rejected drafts, frees, beam forks, step logs retired or abandoned), then
//     books the running groups in order; when a group's appends do not fit,
//     it preempts (frees every sequence of) the LAST running group in the
//     scheduler's order, repeatedly, the group itself last (so victims come
//     from the tail and earlier groups' bookings stand); then, unless a
//     preemption happened while something runs, it admits waiting groups
//     FCFS while they fit (prefix-cache lookups, chunked prefill within the
//     budget: the same rules as before the split, see scheduler_core.hpp);
//   - sliding window (BlockManagerConfig::sliding_window): before a
//     running sequence's appends, its blocks wholly before the window of the
//     first position this booking computes go back to the pool
//     (BlockManager::release_outside_window). A step still in flight may
//     read them, and does so before any step booked from now on runs, which
//     is the only kind that can write a block taken again. The executor
//     keeps the stale ids in its table rows: no kernel reads a block before
//     a row's window;
//   - the reply says what was booked (per sequence: the table delta, the
//     prefix-hit tokens), the copy-on-write copies, the preempted groups, the
//     admitted ones, those that can never fit, and the pool's counters.
// Step log: blocks registered in the prefix cache by a booking are recorded
// under its step id until the scheduler retires the step (it ran) or
// abandons it (it failed or never ran: the blocks' contents were never
// written, so they leave the prefix cache). A pending slot's registration is
// logged under the step that computes it.
//
// Costs: O(what the step books + prelude), never O(pool) or O(context) of
// running sequences; admissions cost O(prompt) as allocation does.
// Not thread-safe: one owner (the block-manager actor, or a test).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/block_manager.hpp"
#include "actors/sequence.hpp"

namespace pagoda::actors {

struct TokenCommit {
  SeqId seq = 0;
  int32_t position = 0;
  TokenId token = -1;
};

// Speculative decoding: seq keeps its first num_tokens slots; the dropped
// ones are pending drafts that were rejected (BlockManager::rollback).
struct SeqRollback {
  SeqId seq = 0;
  int32_t num_tokens = 0;
};

struct SeqFork {
  SeqId parent = 0, child = 0;
  std::vector<BlockId> table;  // reply only: the child's own table when not the parent's (contiguous)
};

// table[from, from + blocks.size()) := blocks (the rest of the table stays).
struct TableDelta {
  int32_t from = 0;
  std::vector<BlockId> blocks;
};

struct SeqAppend {
  SeqId seq = 0;
  std::vector<TokenId> tokens;  // known ids to append
  int32_t pending = 0;          // placeholder slots after them
};

struct GroupAppend {
  RequestId group = 0;
  int32_t slots = 0;                 // toward max_num_seqs
  std::vector<SeqAppend> seqs;       // empty: nothing to compute this step
  std::vector<SeqId> fork_children;  // forked from seqs[0] after its append
};

struct SeqAdmit {
  SeqId seq = 0;
  int32_t index = 0;
  std::shared_ptr<const std::vector<TokenId>> tokens;  // prompt + output so far
};

struct GroupAdmit {
  RequestId group = 0;
  int32_t slots = 0;
  bool beam = false;                 // beams recomputed together share full blocks
  std::vector<SeqAdmit> seqs;        // live sequences, in order
  std::vector<SeqId> fork_children;  // forked from seqs[0] when its prompt completes
};

struct BookingRequest {
  uint64_t step_id = 0;
  // Prelude, applied in this order.
  std::vector<uint64_t> retire_steps, abandon_steps;
  std::vector<TokenCommit> commits;
  std::vector<SeqRollback> rollbacks;
  std::vector<SeqId> frees;
  std::vector<SeqFork> forks;
  std::vector<SeqOwner> owners;      // (re)names sequences for the KV map
  // The step.
  std::vector<GroupAppend> running;  // every running group, oldest admitted first
  std::vector<GroupAdmit> waiting;   // FCFS candidates
  int32_t budget = 0;                // tokens this step
  int32_t max_num_seqs = 0;
};

struct SeqBooked {
  SeqId seq = 0;
  int32_t num_cached = 0;  // tokens already in the cache before this step's
  int32_t num_tokens = 0;  // tokens booked this step
  TableDelta delta;
};

struct GroupBooked {
  RequestId group = 0;
  std::vector<SeqBooked> seqs;
  std::vector<SeqFork> forks;  // done after seqs[0]'s booking
};

struct BlockStats {
  int32_t total = 0, used = 0, free = 0, cached = 0, watermark = 0, block_size = 0;
  int64_t stored_tokens = 0;
  int64_t window_released = 0;  // blocks given back outside a sliding window, in total
  PrefixCacheStats prefix;
};

struct SeqFailure {
  RequestId group = 0;
  SeqId seq = 0;
  std::string error;
};

struct BookingReply {
  uint64_t step_id = 0;
  std::vector<BlockCopy> copies;        // run before attention, in order
  std::vector<SeqFork> forks;           // prelude forks that succeeded
  std::vector<GroupBooked> running;     // in request order; groups not preempted
  std::vector<RequestId> preempted;     // every sequence freed, in preemption order
  std::vector<GroupBooked> admitted;    // in FCFS order
  std::vector<RequestId> never_fit;     // can never be allocated
  std::vector<SeqFailure> failures;     // unexpected: the sequence could not be booked
  BlockStats stats;
};

// The KV map as the booker's owner copies it (BlockBooker::capture(), no
// O(pool) build); assemble() makes the KvSnapshot on any thread.
struct KvCapture {
  PoolCapture pool;
  std::vector<SeqOwner> owners;  // one per sequence in pool.seqs, any order
};
KvSnapshot assemble(KvCapture capture);

class BlockBooker {
 public:
  explicit BlockBooker(BlockManager blocks) : blocks_(std::move(blocks)) {}

  BookingReply book(const BookingRequest& request);
  BlockStats stats() const;
  // The pool and each sequence's owner: O(blocks). For the KV map.
  KvSnapshot snapshot() const;  // assemble(capture())
  KvCapture capture() const;    // flat copies: see PoolCapture
  const BlockManager& manager() const { return blocks_; }
  size_t num_logged_steps() const { return step_log_.size(); }
  size_t num_open_steps() const { return open_steps_.size(); }

 private:
  void prelude(const BookingRequest& r, BookingReply& out);
  void book_running(const BookingRequest& r, BookingReply& out, int32_t& budget, int32_t& slots,
                    bool& preempted);
  bool append_group(const GroupAppend& g, GroupBooked& out, BookingReply& reply, uint64_t step);
  void admit(const BookingRequest& r, BookingReply& out, int32_t budget, int32_t slots);
  AllocStatus group_fits(const GroupAdmit& g) const;
  bool admit_group(const GroupAdmit& g, int32_t& budget, BookingReply& out);
  void fork_children(RequestId group, SeqId parent, const std::vector<SeqId>& children,
                     GroupBooked& out, BookingReply& reply);
  void free_seq(SeqId seq);
  void free_group(RequestId group);
  void own(SeqId seq, RequestId group, int32_t index);
  void log_registered(uint64_t step);

  BlockManager blocks_;
  std::unordered_map<SeqId, SeqOwner> owners_;
  std::unordered_map<RequestId, std::vector<SeqId>> group_seqs_;
  std::map<uint64_t, std::vector<BlockRef>> step_log_;
  std::set<uint64_t> open_steps_;  // booked, not yet retired or abandoned
  std::unordered_map<SeqId, uint64_t> pending_step_;  // seq -> step of its pending slot
};

}  // namespace pagoda::actors
