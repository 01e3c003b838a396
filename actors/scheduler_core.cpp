#include "actors/scheduler_core.hpp"

#include <algorithm>

#include "actors/beam_search.hpp"

namespace pagoda::actors {

SchedulerCore::SchedulerCore(SchedulerConfig config, BlockManager blocks)
    : config_(std::move(config)), blocks_(std::move(blocks)) {}

Result<void> SchedulerCore::add_group(RequestId id, std::vector<TokenId> prompt,
                                      const SamplingOptions& options) {
  if (groups_.contains(id)) return make_error("scheduler: request id already in use");
  if (!options.seed) return make_error("scheduler: the options carry no seed");
  if (auto ok = options.validate(); !ok) return ok.error();
  if (prompt.empty()) return make_error("scheduler: the prompt is empty");
  if (int64_t(prompt.size()) >= config_.max_model_len) {
    return make_error("scheduler: the prompt has " + std::to_string(prompt.size()) +
                      " tokens; at most " + std::to_string(config_.max_model_len - 1) + " fit");
  }
  auto g = std::make_unique<SequenceGroup>();
  g->id = id;
  g->options = options;
  const bool beam = options.beam_width > 0;
  g->forked = !beam && options.n == 1;
  if (beam) g->beam = make_beam_state(options, int32_t(prompt.size()));
  const int32_t count = beam ? 1 : options.n;  // beams: the prompt's sequence first
  g->seqs.resize(size_t(count));
  for (int32_t i = 0; i < count; ++i) {
    Sequence& s = g->seqs[size_t(i)];
    s.id = next_seq_id_++;
    s.index = i;
    s.tokens = prompt;
    s.prompt_len = int32_t(prompt.size());
    s.seed = options.seed_for(i);
    seq_index_[s.id] = {g.get(), i};
  }
  waiting_.push_back(g.get());
  groups_[id] = std::move(g);
  return {};
}

std::vector<Sequence*> SchedulerCore::live_seqs(SequenceGroup& g) {
  std::vector<Sequence*> out;
  for (Sequence& s : g.seqs) {
    if (s.finished()) continue;
    out.push_back(&s);
    if (!g.forked) break;  // only the leader before the fork
  }
  return out;
}

int32_t SchedulerCore::seq_slots(const SequenceGroup& g) const {
  if (g.beam) return g.options.beam_width;
  return g.forked ? g.num_live() : int32_t(g.seqs.size());
}

int32_t SchedulerCore::running_seq_slots() const {
  int32_t n = 0;
  for (GroupPtr g : running_) n += seq_slots(*g);
  return n;
}

StepPlan SchedulerCore::schedule() {
  StepPlan plan;
  plan.step_id = ++step_id_;
  plan.copies = std::move(pending_copies_);  // beam forks of the last apply (contiguous layout)
  pending_copies_.clear();
  budget_ = config_.max_num_batched_tokens;
  const bool preempted = schedule_running(plan);
  // After a preemption nothing new is admitted (the freed blocks go to the
  // running groups first), unless nothing runs at all: then the front of the
  // queue (usually the group just preempted) is admitted, or ended if it can
  // never fit again. Otherwise an empty plan would leave it waiting forever.
  if (!preempted || plan.empty()) admit_waiting(plan);
  retire_finished();  // groups failed at admission
  if (plan.empty()) pending_copies_.swap(plan.copies);  // kept for the next plan
  in_flight_ = !plan.empty();
  inflight_.clear();
  for (const PlanEntry& e : plan.entries) inflight_.push_back({e.seq, int32_t(e.tokens.size())});
  inflight_samples_ = plan.samples.size();
  return plan;
}

bool SchedulerCore::schedule_running(StepPlan& plan) {
  bool preempted = false;
  for (size_t i = 0; i < running_.size() && budget_ > 0; ++i) {
    SequenceGroup& g = *running_[i];
    std::vector<Sequence*> live = live_seqs(g);
    std::vector<SeqId> ids;
    int32_t most = 0;
    for (Sequence* s : live) {
      ids.push_back(s->id);
      most = std::max(most, int32_t(s->tokens.size()) - s->num_computed);
    }
    most = std::min(most, budget_);
    bool self_preempted = false;
    while (!ids.empty() && !blocks_.can_append(ids, most)) {
      preempted = true;
      GroupPtr victim = running_.back();
      preempt(*victim);
      if (victim == &g) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    schedule_group(g, plan);
  }
  return preempted;
}

// Adds every live sequence of g with tokens to compute (within the budget).
void SchedulerCore::schedule_group(SequenceGroup& g, StepPlan& plan) {
  std::vector<Sequence*> live = live_seqs(g);
  for (size_t k = 0; k < live.size() && budget_ > 0; ++k) {
    Sequence& s = *live[k];
    const int32_t remaining = int32_t(s.tokens.size()) - s.num_computed;
    const int32_t n = std::min(remaining, budget_);
    if (n <= 0) continue;
    const auto chunk = std::span<const TokenId>(s.tokens).subspan(size_t(s.num_computed), size_t(n));
    scratch_.slots.clear();
    scratch_.copies.clear();
    if (auto ok = blocks_.append_slots(s.id, chunk, scratch_); !ok) {
      finish_seq(g, s, FinishReason::error, ok.error().message);  // can_append said yes
      continue;
    }
    plan.copies.insert(plan.copies.end(), scratch_.copies.begin(), scratch_.copies.end());
    add_entry(g, s, s.num_computed, n, plan);
  }
}

// One entry for tokens [num_cached, num_cached + n) of s; samples when it
// reaches the end (forking the children first when the group has not yet).
void SchedulerCore::add_entry(SequenceGroup& g, Sequence& s, int32_t num_cached, int32_t n,
                              StepPlan& plan) {
  PlanEntry e;
  e.seq = s.id;
  e.tokens.assign(s.tokens.begin() + num_cached, s.tokens.begin() + num_cached + n);
  e.num_cached = num_cached;
  auto table = blocks_.block_table(s.id);
  e.block_table.assign(table.begin(), table.end());
  plan.entries.push_back(std::move(e));
  budget_ -= n;
  if (num_cached + n != int32_t(s.tokens.size())) return;
  const int32_t entry = int32_t(plan.entries.size()) - 1;
  add_sample(g, s, entry, plan);
  if (g.forked || g.beam) return;
  fork_children(g, num_cached + n);  // the prompt is complete: all n sample this row
  for (size_t i = 1; i < g.seqs.size(); ++i) {
    if (!g.seqs[i].finished()) add_sample(g, g.seqs[i], entry, plan);
  }
}

void SchedulerCore::fork_children(SequenceGroup& g, int32_t computed_after) {
  Sequence& leader = g.seqs[0];
  for (size_t i = 1; i < g.seqs.size(); ++i) {
    Sequence& c = g.seqs[i];
    if (c.finished()) continue;
    if (auto ok = blocks_.fork(leader.id, c.id); !ok) {
      finish_seq(g, c, FinishReason::error, ok.error().message);
      continue;
    }
    c.num_computed = computed_after;  // its blocks are the leader's, written this step
    c.status = SeqStatus::running;
  }
  g.forked = true;
}

void SchedulerCore::add_sample(const SequenceGroup& g, const Sequence& s, int32_t entry,
                               StepPlan& plan) {
  const SamplingOptions& o = g.options;
  PlanSample p;
  p.seq = s.id;
  p.entry = entry;
  if (g.beam) {  // greedy row: only its top candidates (raw log_softmax) matter
    p.params = gpu::SamplingRowParams{.temperature = 0.0f, .seed = s.seed,
                                      .step = uint64_t(s.output_len()),
                                      .num_top_logprobs = g.beam->num_candidates};
    plan.samples.push_back(std::move(p));
    return;
  }
  p.params = gpu::SamplingRowParams{.temperature = o.temperature, .top_k = o.top_k,
                                    .top_p = o.top_p, .min_p = o.min_p,
                                    .repetition_penalty = o.repetition_penalty,
                                    .presence_penalty = o.presence_penalty,
                                    .frequency_penalty = o.frequency_penalty,
                                    .seed = s.seed, .step = uint64_t(s.output_len()),
                                    .num_top_logprobs = o.logprobs};
  if (o.uses_history()) {
    p.history = s.tokens;
    p.prompt_len = s.prompt_len;
  }
  if (s.output_len() < o.min_tokens) {  // as vLLM: no stop token before min_tokens
    p.banned = o.stop_token_ids;
    if (!o.ignore_eos) {
      p.banned.insert(p.banned.end(), config_.eos_token_ids.begin(), config_.eos_token_ids.end());
    }
  }
  plan.samples.push_back(std::move(p));
}

Result<void> SchedulerCore::apply(const StepResult& result) {
  if (!in_flight_) return make_error("scheduler: apply() without a step in flight");
  if (result.step_id != step_id_ || result.samples.size() != inflight_samples_) {
    return make_error("scheduler: the step result does not match the plan in flight");
  }
  in_flight_ = false;
  ++steps_;
  for (const auto& [id, n] : inflight_) {
    auto it = seq_index_.find(id);
    if (it != seq_index_.end()) it->second.first->seqs[size_t(it->second.second)].num_computed += n;
  }
  std::vector<GroupPtr> beam_groups;
  for (const SampleOutput& out : result.samples) {
    auto it = seq_index_.find(out.seq);
    if (it == seq_index_.end()) continue;
    SequenceGroup& g = *it->second.first;
    Sequence& s = g.seqs[size_t(it->second.second)];
    if (s.finished() || s.finish_requested || g.cancel_requested) continue;
    if (!g.beam) {
      on_token(g, s, out);
      continue;
    }
    store_beam_sample(g, s, out);
    if (std::find(beam_groups.begin(), beam_groups.end(), &g) == beam_groups.end()) {
      beam_groups.push_back(&g);
    }
  }
  for (GroupPtr g : beam_groups) {
    if (std::all_of(g->beam->has_pending.begin(), g->beam->has_pending.end(), [](bool b) { return b; })) {
      beam_step(*g);
    }
  }
  for (RequestId id : pending_) {
    auto it = groups_.find(id);
    if (it != groups_.end()) settle_requests(*it->second);
  }
  pending_.clear();
  retire_finished();
  return {};
}

void SchedulerCore::on_token(SequenceGroup& g, Sequence& s, const SampleOutput& out) {
  s.tokens.push_back(out.token);
  ++tokens_generated_;
  SeqEvent ev;
  ev.request = g.id;
  ev.index = s.index;
  ev.has_token = true;
  ev.sample = out;
  ev.finish = finish_check(g, s);
  events_.push_back(std::move(ev));
  if (events_.back().finish != FinishReason::none) {
    finish_seq(g, s, events_.back().finish, {}, /*emit=*/false);
  }
}

FinishReason SchedulerCore::finish_check(const SequenceGroup& g, const Sequence& s) const {
  const SamplingOptions& o = g.options;
  const TokenId t = s.tokens.back();
  auto has = [t](const std::vector<TokenId>& v) { return std::find(v.begin(), v.end(), t) != v.end(); };
  if (s.output_len() >= o.min_tokens) {
    if (has(o.stop_token_ids)) return FinishReason::stop;
    if (!o.ignore_eos && has(config_.eos_token_ids)) return FinishReason::stop;
  }
  if (s.output_len() >= o.max_tokens) return FinishReason::length;
  if (int64_t(s.tokens.size()) >= config_.max_model_len) return FinishReason::length;
  return FinishReason::none;
}

// Ends s (and, before the fork, the children that never started).
void SchedulerCore::finish_seq(SequenceGroup& g, Sequence& s, FinishReason reason,
                               const std::string& error, bool emit) {
  if (s.finished()) return;
  if (blocks_.contains(s.id)) (void)blocks_.free(s.id);
  s.status = SeqStatus::finished;
  s.finish = reason;
  if (emit) {
    SeqEvent ev;
    ev.request = g.id;
    ev.index = s.index;
    ev.finish = reason;
    ev.error = error;
    events_.push_back(std::move(ev));
  }
  if (!g.forked && s.index == 0) {
    for (size_t i = 1; i < g.seqs.size(); ++i) finish_seq(g, g.seqs[i], reason, error, true);
  }
  if (g.beam) {  // a beam never ends alone (error, abort): the search needs all of them
    for (Sequence& o : g.seqs) finish_seq(g, o, reason, error, emit);
  }
}

void SchedulerCore::cancel_group(RequestId id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  it->second->cancel_requested = true;
  if (in_flight_) {
    pending_.push_back(id);
    return;
  }
  settle_requests(*it->second);
  retire_finished();
}

void SchedulerCore::cancel_all() {
  std::vector<RequestId> ids;
  for (const auto& [id, g] : groups_) ids.push_back(id);
  for (RequestId id : ids) cancel_group(id);
}

void SchedulerCore::finish_sequence(RequestId id, int32_t index, FinishReason reason) {
  auto it = groups_.find(id);
  if (it == groups_.end() || index < 0 || size_t(index) >= it->second->seqs.size()) return;
  if (it->second->beam) return;  // beams end by the search's rules only
  Sequence& s = it->second->seqs[size_t(index)];
  if (s.finished() || s.finish_requested) return;
  s.finish_requested = true;
  s.finish = reason;
  if (in_flight_) {
    pending_.push_back(id);
    return;
  }
  settle_requests(*it->second);
  retire_finished();
}

void SchedulerCore::settle_requests(SequenceGroup& g) {
  for (Sequence& s : g.seqs) {
    if (g.cancel_requested) finish_seq(g, s, FinishReason::abort);
    else if (s.finish_requested) finish_seq(g, s, s.finish);
  }
}

void SchedulerCore::retire_finished() {
  for (auto it = groups_.begin(); it != groups_.end();) {
    SequenceGroup* g = it->second.get();
    if (!g->all_finished()) {
      ++it;
      continue;
    }
    std::erase(running_, g);
    std::erase(waiting_, g);
    for (const Sequence& s : g->seqs) seq_index_.erase(s.id);
    SeqEvent ev;
    ev.request = g->id;
    ev.index = -1;
    ev.group_done = true;
    events_.push_back(std::move(ev));
    it = groups_.erase(it);
  }
}

void SchedulerCore::fail_step(const std::string& message) {
  in_flight_ = false;
  pending_.clear();
  pending_copies_.clear();
  for (auto& [id, g] : groups_) {
    for (Sequence& s : g->seqs) finish_seq(*g, s, FinishReason::error, message);
  }
  retire_finished();
  auto fresh = BlockManager::create(blocks_.config());  // drops blocks never written
  if (fresh) blocks_ = std::move(fresh).value();
}

std::vector<SeqEvent> SchedulerCore::take_events() {
  std::vector<SeqEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace pagoda::actors
