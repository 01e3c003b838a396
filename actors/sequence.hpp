// Sequence / SequenceGroup: the scheduler's view of one request (a group) and
// its samples (sequences).
//
// A sequence's `tokens` are its prompt followed by its output. `num_computed`
// counts the leading tokens whose K/V are in the cache; the scheduler computes
// tokens[num_computed..) (a prefill chunk, or the one token sampled last) and
// samples when a step reaches the end. Preemption frees the blocks and resets
// num_computed to 0: the output stays, and is recomputed as part of the prompt.
//
// A group with n > 1 starts with one live sequence (index 0) that prefills the
// prompt; the other n - 1 are forked from it when the prompt's last chunk is
// scheduled (`forked`).
//
// A beam-search group (options.beam_width = k > 0) holds its live beams in
// seqs (index = beam slot); after each ranking seqs is rebuilt from the
// surviving parents (actors/scheduler_core_beam.cpp); `beam` holds the
// ranking state. It counts k toward max_num_seqs while unfinished.
// Not thread-safe: owned by the scheduler core.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/block_manager.hpp"
#include "actors/ngram_proposer.hpp"
#include "actors/sampling_options.hpp"

namespace pagoda::model {
struct ConstraintProgram;  // model/token_matcher.hpp
}  // namespace pagoda::model

namespace pagoda::actors {

using RequestId = uint64_t;
struct BeamState;  // actors/beam_search.hpp

enum class SeqStatus : uint8_t { waiting, running, finished };
// none: still generating; stop: EOS / stop token / stop string; length:
// max_tokens or the model's context; abort: cancelled or preempted beyond
// recovery; error: could never be scheduled (prompt larger than the cache).
enum class FinishReason : uint8_t { none, stop, length, abort, error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error", ""

// The block pool plus who owns each sequence: the KV map the UI draws.
struct SeqOwner {
  SeqId seq = 0;
  RequestId request = 0;
  int32_t index = 0;  // sample (or beam) index in the group
};
// Scale-out (RemoteEngine): the snapshot joins one pool per engine node;
// each is a range of its block ids.
struct KvPoolRange {
  std::string name;  // the node, HOST:PORT
  int32_t first_block = 0, total_blocks = 0, used_blocks = 0, free_blocks = 0, cached_blocks = 0;
};
struct KvSnapshot {
  PoolSnapshot pool;
  std::vector<SeqOwner> owners;  // ascending seq id, one per sequence in pool.seqs
  std::vector<KvPoolRange> pools;  // empty: one pool (an in-process engine)
};

struct Sequence {
  SeqId id = 0;
  int32_t index = 0;                 // sample index within the group
  std::vector<TokenId> tokens;       // prompt + output
  int32_t prompt_len = 0;
  int32_t num_computed = 0;          // K/V written by steps that completed
  int32_t num_scheduled = 0;         // K/V booked by planned steps (>= num_computed)
  int32_t pending = 0;               // samples of steps in flight not yet applied
  uint32_t epoch = 0;                // bumped when preempted: older in-flight records are stale
  bool registered = false;           // the executor holds its state (released when freed)
  std::shared_ptr<const std::vector<TokenId>> frozen;  // tokens while waiting (booking)
  SeqStatus status = SeqStatus::waiting;
  FinishReason finish = FinishReason::none;
  bool finish_requested = false;     // by the request side; honoured after the step
  uint64_t seed = 0;
  // Speculative decoding (options.speculative): the n-gram proposer indexes
  // the committed tokens (null for a draft model, which runs in the
  // executor); drafts are those of the step in flight (their slots are
  // booked pending, the step samples one row per draft + 1; a draft
  // model's are fillers until StepResult::drafted replaces them).
  std::shared_ptr<NgramProposer> proposer;
  std::vector<TokenId> drafts;
  int64_t drafted = 0, accepted = 0;  // totals over the sequence's life
  // Turn-down (scheduler_core_spec.cpp): tokens left without drafting, the
  // next cool-down's length, and the current window's counts.
  int32_t spec_cooldown = 0, spec_backoff = 0;
  int32_t window_drafted = 0, window_accepted = 0, window_misses = 0;

  int32_t output_len() const { return int32_t(tokens.size()) - prompt_len; }
  bool finished() const { return status == SeqStatus::finished; }
};

struct SequenceGroup {
  RequestId id = 0;
  SamplingOptions options;           // seed resolved (has a value)
  std::vector<Sequence> seqs;        // [options.n], index == position
  bool forked = false;               // children exist (always true when n == 1)
  int32_t num_preemptions = 0;
  bool cancel_requested = false;
  std::shared_ptr<BeamState> beam;   // beam search only
  std::shared_ptr<const model::ConstraintProgram> constraint;  // structured output (issue 23)
  uint64_t arrival = 0;              // order of add_group (FCFS within a priority or client)
  bool charged = false;              // fair sharing: its prompt was charged (first admission)
  bool fair_victim = false;          // fair sharing: preempted once to admit a lower counter

  // Sequences that take part in scheduling: the leader before the fork,
  // afterwards every unfinished one.
  int32_t num_live() const;
  bool all_finished() const;
};

}  // namespace pagoda::actors
