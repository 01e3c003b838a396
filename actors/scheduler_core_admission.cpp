// SchedulerCore, admission: FCFS admission of waiting groups when their
// blocks fit, and preemption (see scheduler_core.hpp).
#include <algorithm>

#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

void SchedulerCore::admit_waiting(StepPlan& plan) {
  while (!waiting_.empty() && budget_ > 0) {
    SequenceGroup& g = *waiting_.front();
    if (g.num_live() == 0) {  // cancelled while waiting
      waiting_.pop_front();
      continue;
    }
    if (running_seq_slots() + seq_slots(g) > config_.max_num_seqs) return;
    if (budget_ < g.num_live()) return;
    const AllocStatus fits = group_fits(g);
    if (fits == AllocStatus::later) return;
    waiting_.pop_front();
    if (fits == AllocStatus::never) {
      // A preempted group that has outgrown the whole cache keeps what it
      // generated and ends as if its length limit were reached; one that
      // never produced a token is an error.
      for (Sequence& s : g.seqs) {
        if (s.finished()) continue;
        if (s.output_len() > 0) {
          finish_seq(g, s, FinishReason::length);
        } else {
          finish_seq(g, s, FinishReason::error, "the sequence does not fit in the KV cache");
        }
      }
      continue;
    }
    admit_group(g, plan);
  }
}

// Whether all live sequences of g can be allocated together now.
AllocStatus SchedulerCore::group_fits(SequenceGroup& g) {
  const int32_t bs = blocks_.block_size();
  int64_t need = 0;
  AllocStatus worst = AllocStatus::ok;
  for (Sequence* s : live_seqs(g)) {
    const AllocStatus st = blocks_.can_allocate(s->tokens);
    if (st == AllocStatus::never) return st;
    if (st == AllocStatus::later) worst = st;
    // +1: the slot of the token it samples next. Without it a group that
    // fills the whole pool would be admitted, preempted at its next decode
    // and re-admitted forever without progress.
    need += (int64_t(s->tokens.size()) + 1 + bs - 1) / bs;
  }
  need -= beam_shared_blocks(g);
  const int64_t usable = blocks_.total_blocks() - blocks_.watermark_blocks();
  if (need > usable) return AllocStatus::never;
  const int64_t available = blocks_.num_free_blocks() + blocks_.num_cached_blocks() -
                            blocks_.watermark_blocks();
  if (live_seqs(g).size() > 1 && need > available) worst = AllocStatus::later;
  return worst;
}

void SchedulerCore::admit_group(SequenceGroup& g, StepPlan& plan) {
  std::vector<Sequence*> live = live_seqs(g);
  for (size_t k = 0; k < live.size(); ++k) {
    Sequence& s = *live[k];
    const int32_t reserve = int32_t(live.size() - k - 1);  // one token each for the rest
    auto a = blocks_.allocate(s.id, s.tokens, std::max(1, budget_ - reserve));
    if (!a) {  // group_fits said yes; not expected
      finish_seq(g, s, FinishReason::error, a.error().message);
      continue;
    }
    s.status = SeqStatus::running;
    s.num_computed = a->num_cached_tokens;
    add_entry(g, s, a->num_cached_tokens, int32_t(a->slots.size()), plan);
  }
  running_.push_back(&g);
}

void SchedulerCore::preempt(SequenceGroup& g) {
  for (Sequence& s : g.seqs) {
    if (blocks_.contains(s.id)) (void)blocks_.free(s.id);
    if (s.finished()) continue;
    s.num_computed = 0;
    s.status = SeqStatus::waiting;
  }
  if (g.beam) std::fill(g.beam->has_pending.begin(), g.beam->has_pending.end(), false);
  ++g.num_preemptions;
  ++preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), &g));
  waiting_.push_front(&g);
}

}  // namespace pagoda::actors
