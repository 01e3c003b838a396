// SchedulerCore, the booked half of a step: turning a BookingReply into the
// plan (running groups, admissions, forks), preemption and groups that can
// never fit; and the admission order of the scheduling policies (fcfs, fair,
// priority; see scheduler_core.hpp).
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

void SchedulerCore::commit_running(const BookingReply& reply, StepPlan& plan) {
  for (const GroupBooked& gb : reply.running) {
    auto it = groups_.find(gb.group);
    if (it != groups_.end()) commit_group(*it->second, gb, /*fresh=*/false, plan);
  }
}

void SchedulerCore::commit_admitted(const BookingReply& reply, StepPlan& plan) {
  for (const GroupBooked& gb : reply.admitted) {
    auto it = groups_.find(gb.group);
    if (it == groups_.end()) continue;
    SequenceGroup& g = *it->second;
    unqueue(&g);
    if (g.all_finished()) continue;  // a failure in this booking ended it
    if (!g.charged) {
      fair_.charge_prompt(g.options.client, g.seqs[0].prompt_len);
      g.charged = true;
    }
    insert_running(&g);
    commit_group(g, gb, /*fresh=*/true, plan);
  }
}

// The entries of g's booked sequences (fresh: just admitted, their state
// starts here), then the forks after its leader's booking.
void SchedulerCore::commit_group(SequenceGroup& g, const GroupBooked& gb, bool fresh,
                                 StepPlan& plan) {
  int32_t leader_entry = -1;
  for (const SeqBooked& b : gb.seqs) {
    auto si = seq_index_.find(b.seq);
    if (si == seq_index_.end()) continue;
    Sequence& s = g.seqs[size_t(si->second.second)];
    if (s.finished()) continue;
    if (fresh) {
      s.status = SeqStatus::running;
      s.num_computed = s.num_scheduled = b.num_cached;
      const bool complete = b.num_cached + b.num_tokens == int32_t(s.tokens.size());
      intents_[s.id] = Intent{s.id, b.num_tokens, 0, complete, {}};
    }
    commit_seq(g, s, b, fresh, plan);
    if (leader_entry < 0) leader_entry = int32_t(plan.entries.size()) - 1;
  }
  if (!gb.forks.empty() && leader_entry >= 0) commit_forks(g, gb.forks, leader_entry, plan);
}

// One entry for what s booked; samples when it reaches the end.
void SchedulerCore::commit_seq(SequenceGroup& g, Sequence& s, const SeqBooked& b, bool fresh,
                               StepPlan& plan) {
  auto in = intents_.find(s.id);
  const Intent intent = in == intents_.end() ? Intent{s.id, b.num_tokens, 0, false, {}} : in->second;
  PlanEntry e;
  e.seq = s.id;
  e.tokens.assign(s.tokens.begin() + s.num_scheduled,
                  s.tokens.begin() + s.num_scheduled + intent.known);
  e.tokens.insert(e.tokens.end(), intent.drafts.begin(), intent.drafts.end());
  e.num_placeholders = intent.pending;
  if (g.options.speculative.draft) e.num_drafts = int32_t(intent.drafts.size());
  e.num_cached = s.num_scheduled;
  e.fresh = fresh;
  e.table_from = b.delta.from;
  e.new_blocks = b.delta.blocks;
  if (fresh) {
    e.prompt_len = s.prompt_len;
    if (g.options.uses_history() || g.constraint || g.options.speculative.draft) {
      e.prefix.assign(s.tokens.begin(), s.tokens.begin() + s.num_scheduled);
    }
    e.constraint = g.constraint;
  }
  const int32_t n = e.num_new();
  plan.entries.push_back(std::move(e));
  s.num_scheduled += n;
  s.registered = true;
  building_.entries.push_back({s.id, s.epoch, n});
  // A group's entries are committed together (commit_group).
  if (building_.groups.empty() || building_.groups.back() != g.id) building_.groups.push_back(g.id);
  if (!intent.sample) return;
  const int32_t d = int32_t(intent.drafts.size());
  s.drafts = intent.drafts;
  if (d > 0) building_.drafted = true;
  for (int32_t j = 0; j <= d; ++j) add_sample(g, s, int32_t(plan.entries.size()) - 1, plan, d - j);
}

// n > 1: the children share the prompt the leader just booked and sample
// from its row in this step.
void SchedulerCore::commit_forks(SequenceGroup& g, const std::vector<SeqFork>& forks, int32_t entry,
                                 StepPlan& plan) {
  const Sequence& leader = g.seqs[0];
  for (const SeqFork& f : forks) {
    auto si = seq_index_.find(f.child);
    if (si == seq_index_.end()) continue;
    Sequence& c = g.seqs[size_t(si->second.second)];
    if (c.finished()) continue;
    c.num_computed = c.num_scheduled = leader.num_scheduled;
    c.status = SeqStatus::running;
    c.registered = true;
    plan.forks.push_back({f.parent, f.child, f.table});
    add_sample(g, c, entry, plan);
  }
  g.forked = true;
  for (size_t i = 1; i < g.seqs.size(); ++i) {  // a child the booker could not fork
    Sequence& c = g.seqs[i];
    if (!c.finished() && !c.registered) finish_seq(g, c, FinishReason::error, "fork failed");
  }
}

void SchedulerCore::add_sample(const SequenceGroup& g, Sequence& s, int32_t entry,
                               StepPlan& plan, int32_t row_back) {
  const SamplingOptions& o = g.options;
  const int32_t out_index = s.output_len() + s.pending;  // earlier samples still in flight
  PlanSample p;
  p.seq = s.id;
  p.entry = entry;
  p.row_back = row_back;
  if (g.beam) {  // greedy row: only its top candidates (raw log_softmax) matter
    p.params = gpu::SamplingRowParams{.temperature = 0.0f, .seed = s.seed,
                                      .step = uint64_t(out_index),
                                      .num_top_logprobs = g.beam->num_candidates};
  } else {
    p.params = gpu::SamplingRowParams{.temperature = o.temperature, .top_k = o.top_k,
                                      .top_p = o.top_p, .min_p = o.min_p,
                                      .repetition_penalty = o.repetition_penalty,
                                      .presence_penalty = o.presence_penalty,
                                      .frequency_penalty = o.frequency_penalty,
                                      .seed = s.seed, .step = uint64_t(out_index),
                                      .num_top_logprobs = o.logprobs};
    p.use_history = o.uses_history();
    if (out_index < o.min_tokens) {  // as vLLM: no stop token before min_tokens
      p.banned = o.stop_token_ids;
      if (!o.ignore_eos) {
        p.banned.insert(p.banned.end(), config_.eos_token_ids.begin(), config_.eos_token_ids.end());
      }
    }
  }
  plan.samples.push_back(std::move(p));
  s.pending++;
  building_.samples.push_back({s.id, s.epoch, 0});
}

void SchedulerCore::finish_never_fit(SequenceGroup& g) {
  unqueue(&g);
  // A preempted group that has outgrown the whole cache keeps what it
  // generated and ends as if its length limit were reached; one that never
  // produced a token is an error.
  for (Sequence& s : g.seqs) {
    if (s.finished()) continue;
    if (s.output_len() > 0) {
      finish_seq(g, s, FinishReason::length);
    } else {
      finish_seq(g, s, FinishReason::error, "the sequence does not fit in the KV cache");
    }
  }
}

// Frees every sequence (the booker may have done so already: freeing an
// unknown sequence is a no-op there) and re-queues the group at the front;
// its tokens are recomputed as a longer prompt. Records of its sequences in
// steps still in flight become stale (epoch).
void SchedulerCore::preempt(SequenceGroup& g) {
  for (Sequence& s : g.seqs) {
    frees_.push_back(s.id);
    release_seq(s.id);
    if (s.finished()) continue;
    s.num_computed = s.num_scheduled = 0;
    s.pending = 0;
    s.drafts.clear();
    s.epoch++;
    s.status = SeqStatus::waiting;
    s.frozen.reset();
  }
  if (g.beam) std::fill(g.beam->has_pending.begin(), g.beam->has_pending.end(), false);
  ++g.num_preemptions;
  ++preemptions_;
  std::erase(running_, &g);
  unqueue(&g);
  enqueue(&g, /*front=*/true);
}

// The waiting groups in the order the policy admits them.
std::vector<SchedulerCore::GroupPtr> SchedulerCore::waiting_order() const {
  std::vector<GroupPtr> out(waiting_.begin(), waiting_.end());
  switch (config_.policy) {
    case SchedulingPolicy::fcfs:
      return out;
    case SchedulingPolicy::priority:
      std::stable_sort(out.begin(), out.end(), [](GroupPtr a, GroupPtr b) {
        if (a->options.priority != b->options.priority) return a->options.priority < b->options.priority;
        return a->arrival < b->arrival;
      });
      return out;
    case SchedulingPolicy::fair: {
      std::vector<FairShare::Candidate> queue;
      queue.reserve(out.size());
      for (GroupPtr g : out) {
        queue.push_back({&g->options.client, int64_t(g->seqs[0].prompt_len), g->charged});
      }
      std::vector<GroupPtr> ordered;
      ordered.reserve(out.size());
      for (size_t i : fair_.order(queue, queue.size())) ordered.push_back(out[i]);
      return ordered;
    }
  }
  return out;
}

// Every change of waiting_ goes through these two, so that the counters
// know which clients are backlogged.
void SchedulerCore::enqueue(GroupPtr g, bool front) {
  if (front) {
    waiting_.push_front(g);
  } else {
    waiting_.push_back(g);
  }
  // front: a preempted group (no lift). A new one carries its prompt's cost
  // as the lift's credit (fair_share.hpp).
  const double credit = config_.fair.prompt_credit && !g->charged
                            ? fair_.prompt_cost(g->options.client, g->seqs[0].prompt_len)
                            : 0.0;
  fair_.arrive(g->options.client, /*lift=*/!front, credit);
}

void SchedulerCore::unqueue(GroupPtr g) {
  if (std::erase(waiting_, g) > 0) fair_.leave(g->options.client);
}

// priority: after every running group of a value <= g's (admission order
// within a value); otherwise at the back.
void SchedulerCore::insert_running(GroupPtr g) {
  if (config_.policy != SchedulingPolicy::priority) {
    running_.push_back(g);
    return;
  }
  auto at = std::find_if(running_.begin(), running_.end(), [g](GroupPtr r) {
    return r->options.priority > g->options.priority;
  });
  running_.insert(at, g);
}

namespace {
int64_t ceil_blocks(int64_t tokens, int32_t bs) { return (tokens + bs - 1) / bs; }
}  // namespace

// What admitting g allocates at most (no prefix hits), as the booker counts it.
int64_t SchedulerCore::blocks_to_admit(const SequenceGroup& g) const {
  int64_t need = 0;
  for (const Sequence& s : g.seqs) {
    if (s.finished()) continue;
    need += ceil_blocks(int64_t(s.tokens.size()) + 1, block_stats_.block_size);
    if (!g.forked) break;  // the leader alone before the fork
  }
  return need;
}

// About what preempting g frees (blocks shared between its sequences count
// for each).
int64_t SchedulerCore::blocks_held(const SequenceGroup& g) const {
  int64_t held = 0;
  for (const Sequence& s : g.seqs) {
    if (!s.finished()) held += ceil_blocks(s.num_scheduled, block_stats_.block_size);
  }
  return held;
}

// g may lead or join an urgent step (SchedulerConfig::urgent_prefill_alone):
// new (never admitted: not charged), its client's only waiting group, and
// another client runs with requests waiting. O(running groups).
bool SchedulerCore::urgent(const SequenceGroup& g) const {
  const std::string& client = g.options.client;
  if (g.charged || g.cancel_requested || g.all_finished() || g.id == urgent_miss_ ||
      fair_.queued(client) != 1) {
    return false;
  }
  return std::any_of(running_.begin(), running_.end(), [&](GroupPtr r) {
    return r->options.client != client && !r->all_finished() && fair_.backlogged(r->options.client);
  });
}

// Whether g fits now by the last booking's counts and this booking's
// preemptions (fits_now; no counts yet: only the slots).
bool SchedulerCore::fits_by_last_counts(const SequenceGroup& g) const {
  if (block_stats_.block_size <= 0) return running_seq_slots() + seq_slots(g) <= config_.max_num_seqs;
  return fits_now(g, available_by_last_counts(), running_seq_slots());
}

// The last booking's free and cached blocks above the watermark, plus what
// this booking's preemptions free.
int64_t SchedulerCore::available_by_last_counts() const {
  return int64_t(block_stats_.free) + block_stats_.cached - block_stats_.watermark + preempt_freed_;
}

SchedulerCore::GroupPtr SchedulerCore::best_waiting() const {
  for (GroupPtr g : waiting_order()) {
    if (!g->all_finished() && !g->cancel_requested) return g;
  }
  return nullptr;
}

// Whether g would be admitted with `available` blocks and `slots` sequence
// slots taken (the booker's counts; prefix hits ignored).
bool SchedulerCore::fits_now(const SequenceGroup& g, int64_t available, int32_t slots) const {
  return blocks_to_admit(g) <= available && slots + seq_slots(g) <= config_.max_num_seqs;
}

// Both preempting policies: while the best waiting group would not fit by
// the last booking's counts, preempt the group `pick` names (nullptr: stop).
// The estimate ignores prefix hits and frees still in the outbox, so it may
// preempt one group more than needed; the victims are recomputed later.
void SchedulerCore::preempt_until_fits(SchedulingPolicy policy, const VictimPick& pick) {
  if (config_.policy != policy || waiting_.empty() || running_.empty() ||
      block_stats_.block_size <= 0) {
    return;
  }
  GroupPtr best = best_waiting();
  if (best == nullptr) return;
  if (blocks_to_admit(*best) > int64_t(block_stats_.total) - block_stats_.watermark) return;  // never fits: the booker says so
  // preempt() takes the victim out of running_, so the slots follow; the
  // blocks it frees count from here on through preempt_freed_.
  while (!fits_now(*best, available_by_last_counts(), running_seq_slots())) {
    GroupPtr victim = pick(*best);
    if (victim == nullptr) return;
    preempt_freed_ += blocks_held(*victim);
    preempt(*victim);
  }
}

// priority: the best waiting group takes the place of running groups of a
// larger value, the newest first.
void SchedulerCore::preempt_for_priority() {
  preempt_until_fits(SchedulingPolicy::priority, [this](const SequenceGroup& best) -> GroupPtr {
    if (running_.empty()) return nullptr;
    GroupPtr victim = running_.back();
    return victim->options.priority > best.options.priority ? victim : nullptr;
  });
}

// fair (rule and guards: scheduling_policy.hpp); the victims go back to the
// front, already charged, and are never chosen again.
void SchedulerCore::preempt_for_fairness() {
  preempt_until_fits(SchedulingPolicy::fair, [this](const SequenceGroup& best) -> GroupPtr {
    GroupPtr victim = fairness_victim(best);
    if (victim != nullptr) victim->fair_victim = true;
    return victim;
  });
}

// The newest running group, never a victim before, of the client with the
// highest counter above w's client's (or equal to it, that client holding
// more slots), that client holding at least as many sequence slots as w's
// client would with w; nullptr when there is none.
SchedulerCore::GroupPtr SchedulerCore::fairness_victim(const SequenceGroup& w) const {
  std::unordered_map<std::string_view, int32_t> held;  // running slots per client
  for (GroupPtr r : running_) {
    if (!r->all_finished()) held[r->options.client] += seq_slots(*r);
  }
  const int32_t wanted = held[w.options.client] + seq_slots(w);
  GroupPtr victim = nullptr;
  const double own = fair_.counter(w.options.client);
  double top = own;
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    GroupPtr r = *it;
    if (r->fair_victim || r->all_finished() || held[r->options.client] < wanted) continue;
    const double c = fair_.counter(r->options.client);
    // A counter equal to w's client's (the lift's tie) qualifies only with
    // strictly more slots held than w's client would hold: no swap between
    // equals. Strict > between candidates: the newest (met first) of equals.
    const bool tie_but_more = victim == nullptr && c == own && held[r->options.client] > wanted;
    if (c > top || tie_but_more) {
      top = c;
      victim = r;
    }
  }
  return victim;
}

void SchedulerCore::release_seq(SeqId id) {
  auto it = seq_index_.find(id);
  if (it == seq_index_.end()) return;
  Sequence& s = it->second.first->seqs[size_t(it->second.second)];
  if (!s.registered) return;
  s.registered = false;
  releases_.push_back(id);
}

}  // namespace pagoda::actors
