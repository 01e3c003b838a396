// SchedulerCore, the applied half of a step: results, failures, finishes,
// cancels and events (see scheduler_core.hpp).
#include <algorithm>

#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

Sequence* SchedulerCore::find_seq(SeqId id, uint32_t epoch) {
  auto it = seq_index_.find(id);
  if (it == seq_index_.end()) return nullptr;
  Sequence& s = it->second.first->seqs[size_t(it->second.second)];
  return s.epoch == epoch && s.id == id ? &s : nullptr;
}

Result<void> SchedulerCore::apply(const StepResult& result) {
  if (in_flight_.empty()) return make_error("scheduler: apply() without a step in flight");
  const InFlight& front = in_flight_.front();
  if (result.step_id != front.step_id || result.samples.size() != front.samples.size()) {
    return make_error("scheduler: the step result does not match the plan in flight");
  }
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (f.doomed) {  // planned on top of a failed step (it ran anyway: a timeout)
    doom_step(f);
    return {};
  }
  retire_.push_back(f.step_id);
  ++steps_;
  for (const EntryRec& e : f.entries) {
    if (Sequence* s = find_seq(e.seq, e.epoch)) s->num_computed += e.n;
  }
  fail_rows(f, result);
  std::vector<GroupPtr> beam_groups;
  for (size_t i = 0; i < f.samples.size(); ++i) {
    Sequence* s = find_seq(f.samples[i].seq, f.samples[i].epoch);
    if (s == nullptr) continue;
    s->pending = std::max(0, s->pending - 1);
    SequenceGroup& g = *seq_index_.find(s->id)->second.first;  // find_seq found it
    if (!s->drafts.empty()) {  // a speculative entry: its d + 1 rows are consecutive
      const size_t first = i;
      i += s->drafts.size();
      s->pending = 0;
      if (s->finished() || s->finish_requested || g.cancel_requested) {
        s->drafts.clear();
        continue;
      }
      apply_drafts(g, *s, result, first);
      continue;
    }
    if (s->finished() || s->finish_requested || g.cancel_requested) continue;
    if (!g.beam) {
      on_token(g, *s, result.samples[i]);
      continue;
    }
    store_beam_sample(g, *s, result.samples[i]);
    if (std::find(beam_groups.begin(), beam_groups.end(), &g) == beam_groups.end()) {
      beam_groups.push_back(&g);
    }
  }
  for (GroupPtr g : beam_groups) {
    if (std::all_of(g->beam->has_pending.begin(), g->beam->has_pending.end(), [](bool b) { return b; })) {
      beam_step(*g);
    }
  }
  retire_finished();
  flush_local();
  return {};
}

void SchedulerCore::fail_step(uint64_t step_id, const std::string& message) {
  if (in_flight_.empty() || in_flight_.front().step_id != step_id) return;
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (f.doomed) {
    doom_step(f);
    return;
  }
  abandon_.push_back(f.step_id);  // what it registered was never written
  for (RequestId id : f.groups) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    for (Sequence& s : it->second->seqs) finish_seq(*it->second, s, FinishReason::error, message);
  }
  preempt_fork_groups(f);
  for (InFlight& later : in_flight_) later.doomed = true;  // the executor skips them
  retire_finished();
}

// The groups whose forks or copies rode on a plan that did not run: the
// executor may never have forked their children, so they are recomputed.
void SchedulerCore::preempt_fork_groups(const InFlight& f) {
  for (RequestId id : f.fork_groups) {
    auto it = groups_.find(id);
    if (it == groups_.end() || it->second->all_finished()) continue;
    if (std::find(running_.begin(), running_.end(), it->second.get()) != running_.end()) {
      preempt(*it->second);
    }
  }
}

// Rows the executor failed alone: each ends its own group with `error`
// (only when the row is of the sequence's current epoch).
void SchedulerCore::fail_rows(const InFlight& f, const StepResult& result) {
  for (const SeqError& e : result.errors) {
    uint32_t epoch = 0;
    bool known = false;
    for (const EntryRec& r : f.entries) {
      if (r.seq == e.seq) epoch = r.epoch, known = true;
    }
    for (const EntryRec& r : f.samples) {
      if (r.seq == e.seq) epoch = r.epoch, known = true;
    }
    Sequence* s = known ? find_seq(e.seq, epoch) : nullptr;
    if (s == nullptr) continue;
    SequenceGroup& g = *seq_index_.find(s->id)->second.first;
    for (Sequence& o : g.seqs) finish_seq(g, o, FinishReason::error, e.error);
  }
}

void SchedulerCore::reset_actors(const std::string& message) {
  booking_ = false;
  book_again_ = false;
  while (!in_flight_.empty()) {
    InFlight f = std::move(in_flight_.front());
    in_flight_.pop_front();
    for (RequestId id : f.groups) {
      auto it = groups_.find(id);
      if (it == groups_.end() || f.doomed) continue;
      for (Sequence& s : it->second->seqs) finish_seq(*it->second, s, FinishReason::error, message);
    }
  }
  for (GroupPtr g : std::vector<GroupPtr>(running_)) {
    if (!g->all_finished()) preempt(*g);
  }
  retire_finished();
  for (auto& [id, g] : groups_) {
    for (Sequence& s : g->seqs) s.registered = false;
  }
  commits_.clear();
  rollbacks_.clear();
  truncates_.clear();
  frees_.clear();
  releases_.clear();
  beam_forks_.clear();
  owners_.clear();
  retire_.clear();
  abandon_.clear();
  intents_.clear();
  carry_ = StepPlan{};
  carry_groups_.clear();
  block_stats_.used = block_stats_.cached = 0;
  block_stats_.free = block_stats_.total;
  block_stats_.stored_tokens = 0;
}

void SchedulerCore::skipped_step(uint64_t step_id) {
  if (in_flight_.empty() || in_flight_.front().step_id != step_id) return;
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  doom_step(f);
}

// A step that never ran (or whose run no longer counts): its groups are
// recomputed, its prefix-cache registrations abandoned.
void SchedulerCore::doom_step(const InFlight& f) {
  abandon_.push_back(f.step_id);
  preempt_fork_groups(f);
  for (RequestId id : f.groups) {
    auto it = groups_.find(id);
    if (it == groups_.end() || it->second->all_finished()) continue;
    if (std::find(running_.begin(), running_.end(), it->second.get()) != running_.end()) {
      preempt(*it->second);
    }
  }
  retire_finished();
}

void SchedulerCore::on_token(SequenceGroup& g, Sequence& s, const SampleOutput& out) {
  s.tokens.push_back(out.token);
  if (s.spec_cooldown > 0) --s.spec_cooldown;
  const int32_t pos = int32_t(s.tokens.size()) - 1;
  if (pos < s.num_scheduled) commits_.push_back({s.id, pos, out.token});  // booked as pending
  ++tokens_generated_;
  fair_.charge_output(g.options.client, 1);
  SeqEvent ev;
  ev.request = g.id;
  ev.index = s.index;
  ev.has_token = true;
  ev.sample = out;
  ev.spec_drafted = s.drafted;
  ev.spec_accepted = s.accepted;
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
  if (ends_by_length(g, s, 0)) return FinishReason::length;
  return FinishReason::none;
}

// Whether s ends by length once `extra` more tokens arrive.
bool SchedulerCore::ends_by_length(const SequenceGroup& g, const Sequence& s, int32_t extra) const {
  return s.output_len() + extra >= g.options.max_tokens ||
         int64_t(s.tokens.size()) + extra >= config_.max_model_len;
}

// Ends s (and, before the fork, the children that never started). Its
// blocks are freed by the next booking, its executor state by the next plan.
void SchedulerCore::finish_seq(SequenceGroup& g, Sequence& s, FinishReason reason,
                               const std::string& error, bool emit) {
  if (s.finished()) return;
  frees_.push_back(s.id);
  release_seq(s.id);
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
  SequenceGroup& g = *it->second;
  g.cancel_requested = true;
  for (Sequence& s : g.seqs) finish_seq(g, s, FinishReason::abort);
  retire_finished();
  flush_local();
}

void SchedulerCore::fail_group(RequestId id, const std::string& message) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  for (Sequence& s : it->second->seqs) finish_seq(*it->second, s, FinishReason::error, message);
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
  finish_seq(*it->second, s, reason);
  retire_finished();
  flush_local();
}

void SchedulerCore::retire_finished() {
  for (auto it = groups_.begin(); it != groups_.end();) {
    SequenceGroup* g = it->second.get();
    if (!g->all_finished()) {
      ++it;
      continue;
    }
    std::erase(running_, g);
    unqueue(g);
    fair_.finish(g->options.client);
    for (const Sequence& s : g->seqs) seq_index_.erase(s.id);
    SeqEvent ev;
    ev.request = g->id;
    ev.index = -1;
    ev.group_done = true;
    events_.push_back(std::move(ev));
    it = groups_.erase(it);
  }
}

std::vector<SeqEvent> SchedulerCore::take_events() {
  std::vector<SeqEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace pagoda::actors
