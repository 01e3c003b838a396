// SchedulerCore: continuous batching over a BlockManager, as plain C++ (the
// scheduler actor wraps it; tests drive it with a fake executor).
//
// Each schedule() builds one StepPlan under max_num_batched_tokens (tokens
// computed) and max_num_seqs (sequences running):
//   1. running groups, oldest admitted first: every live sequence computes
//      what it lacks (one decode token, or the next prompt chunk); when the
//      BlockManager cannot give the slots, the most recently admitted running
//      group is preempted (blocks freed, num_computed = 0, re-queued at the
//      FRONT of the waiting queue; its output is kept and recomputed as part
//      of the prompt later), repeatedly, the group itself last;
//   2. when nothing was preempted, waiting groups are admitted FCFS while the
//      BlockManager can allocate their whole prompt (can_allocate == ok), the
//      sequence limit holds and tokens are left in the budget; a prompt larger
//      than the cache can ever hold finishes its group with `error`. A long
//      prompt gets the budget left (chunked prefill); its rest follows in
//      later steps, sharing them with decodes.
// A sequence samples when a step reaches the end of its tokens. A group with
// n > 1 forks its n - 1 children from the leader when the prompt's last chunk
// is scheduled; all n sample from that chunk's last row with their own seeds.
// Sampling is deterministic per sequence: seed = options.seed_for(index),
// step = output length.
//
// Beam search (options.beam_width = k > 0; scheduler_core_beam.cpp): the
// group counts k toward max_num_seqs from admission on. Its prompt is
// prefilled once by one sequence; every live beam's row is greedy and
// reports its best BeamSearch::candidates_per_beam tokens (at most
// gpu::kMaxTopLogprobs). Once every live beam has sampled (the budget may
// split them over steps), apply() ranks them synchronously with the group's
// BeamSearch, frees the dead beams, lets each surviving parent's first child
// keep its sequence and forks the others from it (shared blocks, the partly
// filled one copied on write; contiguous-layout fork copies go into the next
// plan), and emits one event with the ranked beams (the last: beam_final).
// Preemption frees every beam and recomputes each from its tokens (the
// prefix cache re-shares their common full blocks). A fork failure (only
// possible in the contiguous layout) preempts the group. Cancel, errors:
// every beam ends together.
//
// apply() takes the executor's answer, appends the tokens and decides finish
// (stop_token_ids, EOS unless ignore_eos, both only from min_tokens on;
// max_tokens and max_model_len give length). Stop strings are the request
// side's: it calls finish_sequence(). Finished sequences free their blocks.
//
// One step in flight: between schedule() returning a non-empty plan and
// apply(), cancel_group()/finish_sequence() only mark; the blocks are freed in
// apply(), after the step wrote them (BlockManager's contract). fail_step()
// ends every group with `error` and resets the BlockManager (slots of the
// failed step were never written, so no cached block may survive).
// Not thread-safe: one owner (the scheduler actor, or a test).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/beam_search.hpp"
#include "actors/block_manager.hpp"
#include "actors/sequence.hpp"
#include "actors/step_plan.hpp"

namespace pagoda::actors {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_model_len = 2048;          // prompt + output tokens per sequence
  std::vector<TokenId> eos_token_ids;
};

// What happened to one sequence: a new token, a finish, or both.
struct SeqEvent {
  RequestId request = 0;
  int32_t index = 0;
  bool has_token = false;
  SampleOutput sample;                   // valid when has_token
  FinishReason finish = FinishReason::none;
  bool group_done = false;               // the group's last event
  std::string error;                     // with FinishReason::error
  // Beam search: one event per step (has_token, index 0) with the ranked
  // beams (finished and live, best first); the last one has beam_final set
  // and only the finished hypotheses (best first).
  bool beam = false, beam_final = false;
  std::vector<BeamResult> beams;
};

struct SchedulerStats {
  int32_t running_groups = 0, waiting_groups = 0, running_seqs = 0;
  uint64_t preemptions = 0, tokens_generated = 0, steps = 0;
  int32_t total_blocks = 0, used_blocks = 0, free_blocks = 0, cached_blocks = 0;
  PrefixCacheStats prefix;
};

class SchedulerCore {
 public:
  SchedulerCore(SchedulerConfig config, BlockManager blocks);

  // Queues a group. Requires options.seed to hold a value and a new id.
  // Errors: empty prompt, prompt + 1 > max_model_len, invalid options.
  Result<void> add_group(RequestId id, std::vector<TokenId> prompt, const SamplingOptions& options);
  // Ends every sequence of the group with `abort` (no-op for unknown ids).
  void cancel_group(RequestId id);
  void cancel_all();  // cancel_group for every group
  // Ends one sequence (e.g. a stop string matched) with `reason`.
  void finish_sequence(RequestId id, int32_t index, FinishReason reason);

  bool has_unfinished() const { return !groups_.empty(); }
  bool in_flight() const { return in_flight_; }
  // The next step; empty when nothing can run. Requires !in_flight().
  StepPlan schedule();
  // The answer to the plan in flight (matching step_id and samples).
  Result<void> apply(const StepResult& result);
  // The plan in flight failed: every group ends with `error` (see above).
  void fail_step(const std::string& message);
  // Events since the last call (schedule, apply, cancel, fail_step).
  std::vector<SeqEvent> take_events();

  SchedulerStats stats() const;
  // KV utilisation now: distinct tokens stored in blocks held by sequences /
  // (used blocks x block_size); a block shared by forks counts once. 0 when
  // no block is held. O(total blocks + tokens / block_size).
  double kv_utilisation() const;
  const BlockManager& block_manager() const { return blocks_; }
  // The block pool now and the owner of each of its sequences. O(blocks).
  KvSnapshot kv_snapshot() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  using GroupPtr = SequenceGroup*;

  std::vector<Sequence*> live_seqs(SequenceGroup& g);
  int32_t seq_slots(const SequenceGroup& g) const;  // toward max_num_seqs
  int32_t running_seq_slots() const;
  bool schedule_running(StepPlan& plan);
  void schedule_group(SequenceGroup& g, StepPlan& plan);
  void admit_waiting(StepPlan& plan);
  AllocStatus group_fits(SequenceGroup& g);
  int64_t beam_shared_blocks(SequenceGroup& g);
  void admit_group(SequenceGroup& g, StepPlan& plan);
  void add_entry(SequenceGroup& g, Sequence& s, int32_t num_cached, int32_t n, StepPlan& plan);
  void add_sample(const SequenceGroup& g, const Sequence& s, int32_t entry, StepPlan& plan);
  void fork_children(SequenceGroup& g, int32_t computed_after);
  void preempt(SequenceGroup& g);
  void on_token(SequenceGroup& g, Sequence& s, const SampleOutput& out);
  FinishReason finish_check(const SequenceGroup& g, const Sequence& s) const;
  void finish_seq(SequenceGroup& g, Sequence& s, FinishReason reason, const std::string& error = {},
                  bool emit = true);
  void settle_requests(SequenceGroup& g);
  // Beam search (scheduler_core_beam.cpp).
  std::shared_ptr<BeamState> make_beam_state(const SamplingOptions& o, int32_t prompt_len) const;
  void store_beam_sample(SequenceGroup& g, const Sequence& s, const SampleOutput& out);
  void beam_step(SequenceGroup& g);
  void replace_beams(SequenceGroup& g, const std::vector<int32_t>& parents);
  void retire_finished();

  SchedulerConfig config_;
  BlockManager blocks_;
  std::unordered_map<RequestId, std::unique_ptr<SequenceGroup>> groups_;
  std::unordered_map<SeqId, std::pair<GroupPtr, int32_t>> seq_index_;
  std::deque<GroupPtr> waiting_;
  std::vector<GroupPtr> running_;  // admission order: back() is the newest
  std::vector<SeqEvent> events_;
  AppendResult scratch_;
  std::vector<BlockCopy> pending_copies_;  // from beam forks, run by the next plan
  SeqId next_seq_id_ = 1;
  uint64_t step_id_ = 0;
  int32_t budget_ = 0;
  bool in_flight_ = false;
  std::vector<std::pair<SeqId, int32_t>> inflight_;  // (seq, tokens computed)
  size_t inflight_samples_ = 0;
  std::vector<RequestId> pending_;  // cancels / finishes to settle after the step
  uint64_t steps_ = 0;
  uint64_t preemptions_ = 0, tokens_generated_ = 0;
};

}  // namespace pagoda::actors
