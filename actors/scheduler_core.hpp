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
//   2. when nothing was preempted, waiting groups are admitted in the order
//      of SchedulerConfig::policy (below; FCFS by default) while the
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
// Policies (actors/scheduling_policy.hpp; scheduler_core_admission.cpp):
// fcfs is the above. fair orders the waiting candidates with the Virtual
// Token Counter (fair_share()): client = options.client; a new group's
// arrival lifts its client with the group's prompt cost as credit
// (FairShareConfig::prompt_credit); a group's prompt is charged once, at its
// first admission; every sampled token is charged as output. Before booking, when the best waiting group would not fit (slots
// or blocks), fair preempts the newest running group of the client with the
// highest counter, if that counter is above the waiting client's, that
// client holds at least as many sequence slots as the waiting one would
// with the group, and the victim was never a fairness victim before
// (preempt_for_fairness). priority orders waiting candidates and running groups by
// (options.priority, arrival), so the booker's victims (the tail) are the
// largest values; before booking, when the best waiting group would not fit
// by the last booking's block counts (or the sequence limit), running groups
// of a strictly larger value are preempted from the tail until it would.
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
// The block manager lives behind a booking (actors/block_booking.hpp): a
// step is prepare() -> BookingRequest, answered by the block-manager actor's
// BlockBooker -> commit(BookingReply) -> StepPlan. Frees, commits of tokens
// learned from results and beam forks wait in an outbox for the next
// booking (has_outbox(); a booking may carry only the outbox). With a local
// booker (the constructor taking a BlockManager, for tests and tools)
// schedule() does all three at once.
//
// Scheduling ahead (SchedulerConfig::max_in_flight = 2): a plan may be
// prepared while another is in flight. A running decode then computes a
// placeholder (PlanEntry::num_placeholders: the id its in-flight step
// samples, which the executor feeds in itself) and samples again; a
// sequence whose in-flight sample ends it by length is not scheduled. Its
// slot is booked pending and committed once the token is known. Results are
// applied in step order; a sample or entry of a sequence that was preempted
// or finished since its step was planned is ignored (epochs). Beam groups
// stay lockstep: they are planned only with no step of theirs in flight.
// A step that carries speculative drafts is a barrier: no plan is prepared
// while it is in flight, so its drafting groups (whose next drafts need its
// last token) advance every step instead of every other one, at the price
// of that step's host work not overlapping (docs/architecture.md).
// Freeing while a step is in flight is safe: the executor runs steps in
// order, so a block is reused only by a later step; a failed step's
// prefix-cache registrations are abandoned.
//
// Speculative decoding (options.speculative; scheduler_core_spec.cpp): a
// decoding sequence of such a group computes its last token plus up to k
// drafted ones (NgramProposer over its committed tokens, or k filler slots
// the executor's draft model fills, PlanEntry::num_drafts; their slots
// booked pending, so never hashed) and samples every one of those rows with the
// step = output index it stands for; apply() keeps the drafts up to the
// first that differs from the sampler's own draw and commits the draws
// (actors/speculative_verify.hpp: the tokens are those of a run without
// speculation). The rejected slots are rolled back in the block manager
// (next booking) and in the executor's state (next plan's truncates).
// Drafts count against the step's token budget. Such a group is planned
// only with no step of its own in flight, as beams are. Turn-down: a
// sequence whose drafts are mostly rejected (< 35% of 16) or which finds no
// match 4 times in a row cools down (no drafts, scheduled ahead as usual)
// for 16, 32, ... 256 tokens (a good window halves the next one); a step
// with more than speculative_max_batch running sequences drafts nothing.
//
// Failures: fail_step(id) (the oldest step in flight failed or timed out)
// ends only the groups in that step with `error`, and dooms the steps
// planned on top of it (the executor skips them: StepPlan::depends_on);
// skipped_step(id) then preempts (recomputes) the groups of a doomed step.
// A group whose forks or copies rode on a plan that failed or was skipped
// (without entries of its own there) is preempted too, so no sequence is
// left that the executor never forked. A row that failed alone
// (StepResult::errors) ends its own group with `error`; the rest of the
// step is applied.
// Waiting groups and the prefix cache survive. No new plan is prepared
// while doomed steps are in flight.
// Not thread-safe: one owner (the scheduler actor, or a test).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/beam_search.hpp"
#include "actors/block_booking.hpp"
#include "actors/block_manager.hpp"
#include "actors/fair_share.hpp"
#include "actors/scheduling_policy.hpp"
#include "actors/sequence.hpp"
#include "actors/step_plan.hpp"

namespace pagoda::actors {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_model_len = 2048;          // prompt + output tokens per sequence
  std::vector<TokenId> eos_token_ids;
  int32_t max_in_flight = 1;             // 2: schedule one step ahead
  int32_t max_spec_tokens = 64;          // drafted tokens per step (the executor's extra rows)
  // The default for requests that leave options.speculative unset (applied
  // only where SamplingOptions::speculation_supported()).
  SpeculativeOptions speculative;
  // No drafting in a step whose running sequences exceed this. Measured on
  // the CPU (docs/benchmarks.md): open chat loses 10-14% from 2 streams on
  // (a drafting step is a barrier), copying workloads still gain 1.3-2x up
  // to 8; so by default only a sequence running alone drafts.
  int32_t speculative_max_batch = 1;
  // The executor has a draft model: requests may choose speculative.draft.
  bool draft_model = false;
  SchedulingPolicy policy = SchedulingPolicy::fcfs;
  FairShareConfig fair;                  // policy == fair
  // max_in_flight 2: the next step is prepared only once the newest step in
  // flight has reported progress (note_progress: its forward pass issued,
  // only its sampling left; or its result came), not as soon as it is sent,
  // so a request that arrives during a step can join the next one rather
  // than the one after it. false: prepared as soon as a step is sent.
  bool book_on_progress = false;
  // fair: a step whose first admission is an urgent group admits urgent
  // groups only and runs no other rows, so that a client's first token waits
  // for its own prompt alone, not for the rows of a client with a queue. A
  // group is urgent when it is new (never admitted), the only one its client
  // has waiting, another client both runs and has requests waiting, and it
  // fits now (by the last booking's counts plus what this booking's
  // preemptions free); the step after an urgent step is not urgent, so the running
  // rows advance at least every other step. An urgent step costs the running
  // rows one step of delay and nothing else (no charge or order changes);
  // mixed, they would have waited for the same prompt inside their step.
  bool urgent_prefill_alone = false;
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
  // Speculative decoding: the sequence's drafted and accepted totals so far
  // (on its token events; 0 without speculation).
  int64_t spec_drafted = 0, spec_accepted = 0;
};

struct SchedulerStats {
  int32_t running_groups = 0, waiting_groups = 0, running_seqs = 0;
  uint64_t preemptions = 0, tokens_generated = 0, steps = 0;
  uint64_t urgent_steps = 0;  // steps of urgent admissions only (urgent_prefill_alone)
  SpecStats spec;  // speculative tokens proposed / kept, by proposer
  int32_t total_blocks = 0, used_blocks = 0, free_blocks = 0, cached_blocks = 0;
  int64_t stored_tokens = 0;
  int32_t block_size = 0;
  PrefixCacheStats prefix;
};

class SchedulerCore {
 public:
  // With the block manager behind an actor (the caller books).
  explicit SchedulerCore(SchedulerConfig config);
  // With a local booker over `blocks` (tests, tools): schedule() books itself.
  SchedulerCore(SchedulerConfig config, BlockManager blocks);

  // Queues a group. Requires options.seed to hold a value and a new id.
  // Errors: empty prompt, prompt + 1 > max_model_len, invalid options.
  // constraint: the group's compiled output constraint (issue 23), or nullptr.
  Result<void> add_group(RequestId id, std::vector<TokenId> prompt, const SamplingOptions& options,
                         std::shared_ptr<const model::ConstraintProgram> constraint = nullptr);
  // Ends every sequence of the group with `abort` (no-op for unknown ids).
  void cancel_group(RequestId id);
  void cancel_all();  // cancel_group for every group
  // Ends every sequence of the group with `error` (no-op for unknown ids).
  void fail_group(RequestId id, const std::string& message);
  // Ends one sequence (e.g. a stop string matched) with `reason`.
  void finish_sequence(RequestId id, int32_t index, FinishReason reason);

  // Groups left, or outbox work for the block manager.
  bool has_unfinished() const { return !groups_.empty() || has_outbox(); }
  bool has_outbox() const;
  bool in_flight() const { return !in_flight_.empty(); }
  int32_t num_in_flight() const { return int32_t(in_flight_.size()); }
  // Whether prepare() may be called now: no booking outstanding, fewer than
  // max_in_flight steps in flight, none doomed, and work or outbox left.
  bool can_prepare() const;
  BookingRequest prepare();
  // The plan of the booking answered by `reply` (empty when nothing runs;
  // then nothing is in flight for it). booked_again() says whether an empty
  // plan came from preemptions, so booking again at once may admit.
  StepPlan commit(const BookingReply& reply);
  bool book_again() const { return book_again_; }
  // Local booker only: prepare + book + commit.
  StepPlan schedule();
  // Local booker only, nothing in flight: books the outbox alone (frees),
  // as the actor's next booking would. apply() and cancels call it.
  void flush_local();
  // The answer to the oldest plan in flight (matching step_id and samples).
  Result<void> apply(const StepResult& result);
  // The oldest plan in flight failed (see above).
  void fail_step(uint64_t step_id, const std::string& message);
  // The executor skipped a doomed plan (oldest in flight).
  void skipped_step(uint64_t step_id);
  uint64_t oldest_in_flight() const { return in_flight_.empty() ? 0 : in_flight_.front().step_id; }
  // The executor reported progress in step `step_id` (book_on_progress);
  // true when that step is in flight and had not reported before.
  bool note_progress(uint64_t step_id);
  // Supervision: the executor and/or the block manager were replaced (one
  // died or hung), so every executor state and every booking is gone. Each
  // step in flight ends: its groups with `error` (those of doomed steps are
  // preempted); every other running group is preempted (recomputed later);
  // the outbox, the carried plan state and pending releases are dropped;
  // the block stats read as a fresh pool until the next booking. Waiting
  // groups survive. Also clears an outstanding booking (its reply never
  // comes). Requires that the next booking goes to a fresh (or reset) pool.
  void reset_actors(const std::string& message);
  // Events since the last call (schedule, apply, cancel, fail_step).
  std::vector<SeqEvent> take_events();

  SchedulerStats stats() const;
  // KV utilisation now: booked slots in held blocks / (used blocks x
  // block_size); a block shared by forks counts once. O(1).
  double kv_utilisation() const;
  // Local booker only.
  const BlockManager& block_manager() const { return local_->manager(); }
  const BlockBooker& booker() const { return *local_; }
  const SchedulerConfig& config() const { return config_; }
  // The virtual token counters (kept under every policy; only `fair` orders by them).
  const FairShare& fair_share() const { return fair_; }

 private:
  using GroupPtr = SequenceGroup*;
  struct EntryRec {
    SeqId seq;
    uint32_t epoch;
    int32_t n;
  };
  struct InFlight {
    uint64_t step_id = 0;
    std::vector<EntryRec> entries;
    std::vector<EntryRec> samples;  // n unused
    std::vector<RequestId> groups;
    std::vector<RequestId> fork_groups;  // forks or copies in the plan (preempted if it never runs)
    bool doomed = false;
    bool drafted = false;  // carries speculative drafts: nothing is planned behind it
    bool progressed = false;  // note_progress: the next step may be prepared
  };
  // What prepare() asked per sequence, used by commit() to build the plan.
  struct Intent {
    SeqId seq = 0;
    int32_t known = 0, pending = 0;  // tokens from num_scheduled on
    bool sample = false;
    std::vector<TokenId> drafts;     // speculative: computed after the known ids
  };

  std::vector<Sequence*> live_seqs(SequenceGroup& g);
  int32_t seq_slots(const SequenceGroup& g) const;  // toward max_num_seqs
  int32_t running_seq_slots() const;
  bool group_in_flight(const SequenceGroup& g) const;
  void prepare_running(BookingRequest& r, int32_t budget);
  void prepare_group(SequenceGroup& g, GroupAppend& a);
  void prepare_waiting(BookingRequest& r, const std::vector<GroupPtr>& order, bool urgent_only);
  // urgent_prefill_alone (scheduler_core_admission.cpp).
  bool urgent(const SequenceGroup& g) const;
  bool fits_by_last_counts(const SequenceGroup& g) const;
  int64_t available_by_last_counts() const;  // free + cached - watermark blocks
  // Admission order (scheduler_core_admission.cpp).
  std::vector<GroupPtr> waiting_order() const;
  void enqueue(GroupPtr g, bool front);
  void unqueue(GroupPtr g);
  void insert_running(GroupPtr g);
  using VictimPick = std::function<GroupPtr(const SequenceGroup& best)>;
  void preempt_until_fits(SchedulingPolicy policy, const VictimPick& pick);
  void preempt_for_priority();
  // fair: the rule and its guards are in scheduling_policy.hpp.
  void preempt_for_fairness();
  GroupPtr best_waiting() const;  // the first admissible group in waiting_order()
  GroupPtr fairness_victim(const SequenceGroup& w) const;
  bool fits_now(const SequenceGroup& g, int64_t available, int32_t slots) const;
  int64_t blocks_to_admit(const SequenceGroup& g) const;
  int64_t blocks_held(const SequenceGroup& g) const;
  void take_outbox(BookingRequest& r);
  void commit_running(const BookingReply& reply, StepPlan& plan);
  void commit_admitted(const BookingReply& reply, StepPlan& plan);
  void commit_group(SequenceGroup& g, const GroupBooked& gb, bool fresh, StepPlan& plan);
  void commit_seq(SequenceGroup& g, Sequence& s, const SeqBooked& b, bool fresh, StepPlan& plan);
  void commit_forks(SequenceGroup& g, const std::vector<SeqFork>& forks, int32_t entry,
                    StepPlan& plan);
  void finish_never_fit(SequenceGroup& g);
  void doom_step(const InFlight& f);
  void preempt_fork_groups(const InFlight& f);
  void fail_rows(const InFlight& f, const StepResult& result);
  void add_sample(const SequenceGroup& g, Sequence& s, int32_t entry, StepPlan& plan,
                  int32_t row_back = 0);
  // Speculative decoding (scheduler_core_spec.cpp).
  static bool speculates(const SequenceGroup& g) { return g.options.speculative.active(); }
  // Whether g drafts in the step being prepared (then it runs lockstep).
  bool drafting(const SequenceGroup& g, bool batch_ok) const {
    return speculates(g) && batch_ok && g.seqs[0].spec_cooldown == 0;
  }
  void note_drafts(Sequence& s, int32_t drafted, int32_t accepted);
  std::vector<TokenId> propose_drafts(const SequenceGroup& g, Sequence& s, int32_t budget) const;
  // Applies the d + 1 samples of s's speculative entry (samples[first, first + d]).
  void apply_drafts(SequenceGroup& g, Sequence& s, const StepResult& result, size_t first);
  void preempt(SequenceGroup& g);
  void on_token(SequenceGroup& g, Sequence& s, const SampleOutput& out);
  FinishReason finish_check(const SequenceGroup& g, const Sequence& s) const;
  bool ends_by_length(const SequenceGroup& g, const Sequence& s, int32_t extra) const;
  void finish_seq(SequenceGroup& g, Sequence& s, FinishReason reason, const std::string& error = {},
                  bool emit = true);
  void release_seq(SeqId id);
  Sequence* find_seq(SeqId id, uint32_t epoch);
  // Beam search (scheduler_core_beam.cpp).
  std::shared_ptr<BeamState> make_beam_state(const SamplingOptions& o, int32_t prompt_len) const;
  void store_beam_sample(SequenceGroup& g, const Sequence& s, const SampleOutput& out);
  void beam_step(SequenceGroup& g);
  void replace_beams(SequenceGroup& g, const std::vector<int32_t>& parents);
  void retire_finished();

  SchedulerConfig config_;
  std::optional<BlockBooker> local_;
  std::unordered_map<RequestId, std::unique_ptr<SequenceGroup>> groups_;
  std::unordered_map<SeqId, std::pair<GroupPtr, int32_t>> seq_index_;
  std::deque<GroupPtr> waiting_;
  std::vector<GroupPtr> running_;  // admission order: back() is the newest
  std::vector<SeqEvent> events_;
  // Outbox for the next booking, and the executor's releases for the next plan.
  std::vector<TokenCommit> commits_;
  std::vector<SeqRollback> rollbacks_;
  std::vector<SeqTruncate> truncates_;   // for the next plan
  std::vector<SeqId> frees_, releases_;
  std::vector<SeqFork> beam_forks_;
  std::vector<SeqOwner> owners_;
  std::vector<uint64_t> retire_, abandon_;
  std::deque<InFlight> in_flight_;
  std::unordered_map<SeqId, Intent> intents_;
  InFlight building_;   // the record of the plan commit() builds
  StepPlan carry_;      // releases, forks and copies of an empty plan
  std::vector<RequestId> carry_groups_;  // the groups of carry_'s forks
  bool booking_ = false, book_again_ = false;
  // urgent_prefill_alone: the booking outstanding is an urgent step (led by
  // urgent_head_); a group whose urgent step admitted nothing (urgent_miss_)
  // is not urgent again; the step after an urgent one is not urgent
  // (last_urgent_), so running rows advance at least every other step.
  bool urgent_step_ = false, last_urgent_ = false;
  RequestId urgent_head_ = 0, urgent_miss_ = 0;
  // Blocks the preemptions of the booking being prepared free (about:
  // blocks_held), which that booking applies before its admissions.
  int64_t preempt_freed_ = 0;
  BlockStats block_stats_;
  SeqId next_seq_id_ = 1;
  uint64_t next_arrival_ = 0;
  FairShare fair_;
  uint64_t step_id_ = 0;
  uint64_t steps_ = 0;
  uint64_t preemptions_ = 0, tokens_generated_ = 0, urgent_steps_ = 0;
  SpecStats spec_;
};

}  // namespace pagoda::actors
