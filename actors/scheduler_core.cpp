#include "actors/scheduler_core.hpp"

#include <algorithm>

#include "actors/beam_search.hpp"
#include "actors/engine_errors.hpp"

namespace pagoda::actors {

SchedulerCore::SchedulerCore(SchedulerConfig config)
    : config_(std::move(config)), fair_(config_.fair) {
  config_.max_in_flight = std::clamp(config_.max_in_flight, 1, 2);
}

SchedulerCore::SchedulerCore(SchedulerConfig config, BlockManager blocks)
    : SchedulerCore(std::move(config)) {
  local_.emplace(std::move(blocks));
  block_stats_ = local_->stats();
}

Result<void> SchedulerCore::add_group(RequestId id, std::vector<TokenId> prompt,
                                      const SamplingOptions& options,
                                      std::shared_ptr<const model::ConstraintProgram> constraint) {
  if (groups_.contains(id)) return make_error("scheduler: request id already in use");
  if (!options.seed) return make_error("scheduler: the options carry no seed");
  if (auto ok = options.validate(); !ok) return ok.error();
  if (prompt.empty()) return make_error("scheduler: the prompt is empty");
  if (options.speculative.draft && !config_.draft_model) {
    return make_error(std::string(kInvalidRequest) + "speculative \"draft\" needs a server started "
                      "with a draft model (--speculative draft:MODEL)");
  }
  if (int64_t(prompt.size()) >= config_.max_model_len) {
    return make_error("scheduler: the prompt has " + std::to_string(prompt.size()) +
                      " tokens; at most " + std::to_string(config_.max_model_len - 1) + " fit");
  }
  auto g = std::make_unique<SequenceGroup>();
  g->id = id;
  g->options = options;
  g->constraint = std::move(constraint);
  SpeculativeOptions& spec = g->options.speculative;
  const bool fits = config_.speculative.draft ? options.draft_supported() : options.speculation_supported();
  if (!spec.set && config_.speculative.active() && fits) {
    spec = config_.speculative;
  } else if (spec.active()) {  // the fields the request left out are the server's
    spec.config = spec.config.merged_with(config_.speculative.config);
    if (auto ok = spec.config.validate(); !ok) return ok.error();
  }
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
    if (g->options.speculative.ngram) {
      s.proposer = std::make_shared<NgramProposer>(g->options.speculative.config);
    }
    seq_index_[s.id] = {g.get(), i};
  }
  g->arrival = next_arrival_++;
  GroupPtr raw = g.get();
  groups_[id] = std::move(g);
  fair_.start(raw->options.client);
  enqueue(raw, /*front=*/false);
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

// Whether a step still in flight computes or samples for g (exact: records
// of steps from before a preemption do not count).
bool SchedulerCore::group_in_flight(const SequenceGroup& g) const {
  for (const Sequence& s : g.seqs) {
    if (!s.finished() && (s.pending > 0 || s.num_scheduled > s.num_computed)) return true;
  }
  return false;
}

bool SchedulerCore::has_outbox() const {
  // Retired and abandoned step ids ride on the next booking (its prelude
  // handles them first); alone they make no booking.
  return !commits_.empty() || !rollbacks_.empty() || !frees_.empty() || !beam_forks_.empty() ||
         !owners_.empty();
}

bool SchedulerCore::can_prepare() const {
  if (booking_ || int32_t(in_flight_.size()) >= config_.max_in_flight) return false;
  for (const InFlight& f : in_flight_) {
    if (f.doomed || f.drafted) return false;
  }
  if (config_.book_on_progress && !in_flight_.empty() && !in_flight_.back().progressed) return false;
  return !groups_.empty() || has_outbox();
}

bool SchedulerCore::note_progress(uint64_t step_id) {
  for (InFlight& f : in_flight_) {
    if (f.step_id != step_id || f.progressed) continue;
    f.progressed = true;
    return true;
  }
  return false;
}

BookingRequest SchedulerCore::prepare() {
  BookingRequest r;
  r.step_id = ++step_id_;
  booking_ = true;
  book_again_ = false;
  preempt_freed_ = 0;
  preempt_for_priority();  // their frees ride on this booking
  preempt_for_fairness();
  take_outbox(r);
  r.budget = config_.max_num_batched_tokens;
  r.max_num_seqs = config_.max_num_seqs;
  intents_.clear();
  // The admission order once per booking (after this booking's preemptions).
  const std::vector<GroupPtr> order = waiting_order();
  // urgent_prefill_alone: the running groups get no tokens this step.
  urgent_step_ = false;
  if (config_.urgent_prefill_alone && config_.policy == SchedulingPolicy::fair && !last_urgent_) {
    auto head = std::find_if(order.begin(), order.end(), [](GroupPtr g) {
      return !g->all_finished() && !g->cancel_requested;
    });
    if (head != order.end()) {
      urgent_step_ = urgent(**head) && fits_by_last_counts(**head);
      urgent_head_ = (*head)->id;
    }
  }
  prepare_running(r, urgent_step_ ? 0 : r.budget);
  prepare_waiting(r, order, urgent_step_);
  return r;
}

void SchedulerCore::take_outbox(BookingRequest& r) {
  r.retire_steps.swap(retire_);
  r.abandon_steps.swap(abandon_);
  r.commits.swap(commits_);
  r.rollbacks.swap(rollbacks_);
  r.frees.swap(frees_);
  r.forks.swap(beam_forks_);
  r.owners.swap(owners_);
}

void SchedulerCore::prepare_running(BookingRequest& r, int32_t budget) {
  int32_t spec_left = config_.max_spec_tokens;
  const bool batch_ok = running_seq_slots() <= config_.speculative_max_batch;
  for (GroupPtr g : running_) {
    GroupAppend a;
    a.group = g->id;
    a.slots = seq_slots(*g);
    const bool spec = drafting(*g, batch_ok);
    const bool lockstep = g->beam || spec;
    if (budget > 0 && !(lockstep && group_in_flight(*g)) && !g->cancel_requested) {
      std::vector<Sequence*> live = live_seqs(*g);
      for (size_t k = 0; k < live.size() && budget > 0; ++k) {
        Sequence& s = *live[k];
        const int32_t known_end = int32_t(s.tokens.size());
        if (s.finish_requested || (s.pending > 0 && ends_by_length(*g, s, s.pending))) continue;
        const int32_t remaining = known_end + s.pending - s.num_scheduled;
        if (remaining <= 0) continue;
        const int32_t n = std::min(remaining, budget);
        const int32_t known = std::clamp(known_end - s.num_scheduled, 0, n);
        SeqAppend sa;
        sa.seq = s.id;
        sa.tokens.assign(s.tokens.begin() + s.num_scheduled, s.tokens.begin() + s.num_scheduled + known);
        sa.pending = n - known;
        const bool sample = s.num_scheduled + n == known_end + s.pending;
        intents_[s.id] = Intent{s.id, known, n - known, sample, {}};
        if (spec && sample && known == 1 && n == 1) {  // a decode: draft after it
          Intent& in = intents_[s.id];
          in.drafts = propose_drafts(*g, s, std::min(budget - 1, spec_left));
          if (in.drafts.empty()) note_drafts(s, 0, 0);
          spec_left -= int32_t(in.drafts.size());
          sa.pending = int32_t(in.drafts.size());  // booked pending: never hashed unless kept
          budget -= sa.pending;
        }
        a.seqs.push_back(std::move(sa));
        budget -= n;
        if (sample && !g->forked && !g->beam) {
          for (size_t i = 1; i < g->seqs.size(); ++i) {
            if (!g->seqs[i].finished()) a.fork_children.push_back(g->seqs[i].id);
          }
        }
      }
    }
    r.running.push_back(std::move(a));
  }
}

void SchedulerCore::prepare_waiting(BookingRequest& r, const std::vector<GroupPtr>& order,
                                    bool urgent_only) {
  int32_t slots = running_seq_slots();
  for (GroupPtr g : order) {
    std::vector<Sequence*> live = live_seqs(*g);
    if (live.empty() || (urgent_only && !urgent(*g))) continue;
    if (slots + seq_slots(*g) > config_.max_num_seqs ||
        int32_t(r.waiting.size()) >= config_.max_num_seqs) {
      break;
    }
    GroupAdmit a;
    a.group = g->id;
    a.slots = seq_slots(*g);
    a.beam = g->beam != nullptr;
    for (Sequence* s : live) {
      if (!s->frozen || s->frozen->size() != s->tokens.size()) {
        s->frozen = std::make_shared<const std::vector<TokenId>>(s->tokens);
      }
      a.seqs.push_back(SeqAdmit{s->id, s->index, s->frozen});
    }
    if (!g->forked && !g->beam) {
      for (size_t i = 1; i < g->seqs.size(); ++i) {
        if (!g->seqs[i].finished()) a.fork_children.push_back(g->seqs[i].id);
      }
    }
    slots += a.slots;
    r.waiting.push_back(std::move(a));
  }
}

StepPlan SchedulerCore::schedule() {
  // As the scheduler actor does: an empty plan after preemptions books again
  // (admission may now run); the outbox of an empty plan is flushed.
  for (int round = 0; local_ && can_prepare() && round < 8; ++round) {
    StepPlan plan = commit(local_->book(prepare()));
    if (!plan.empty()) return plan;
    if (!book_again_ && !has_outbox()) break;
  }
  return StepPlan{};
}

void SchedulerCore::flush_local() {
  if (!local_ || !in_flight_.empty() || booking_ || !has_outbox()) return;
  BookingRequest r;
  r.step_id = ++step_id_;
  take_outbox(r);
  booking_ = true;
  (void)commit(local_->book(r));  // books nothing: its forks and copies wait in carry_
}

StepPlan SchedulerCore::commit(const BookingReply& reply) {
  booking_ = false;
  block_stats_ = reply.stats;
  StepPlan plan = std::move(carry_);  // state changes kept from an empty plan
  carry_ = StepPlan{};
  plan.step_id = reply.step_id;
  plan.depends_on = in_flight_.empty() ? 0 : in_flight_.back().step_id;
  building_ = InFlight{};
  building_.step_id = reply.step_id;
  building_.fork_groups.swap(carry_groups_);
  for (RequestId id : reply.preempted) {
    auto it = groups_.find(id);
    if (it != groups_.end() && !it->second->all_finished()) preempt(*it->second);
  }
  for (const SeqFailure& f : reply.failures) {
    auto it = seq_index_.find(f.seq);
    if (it == seq_index_.end()) continue;
    finish_seq(*it->second.first, it->second.first->seqs[size_t(it->second.second)],
               FinishReason::error, f.error);
  }
  for (const SeqFork& f : reply.forks) {
    plan.pre_forks.push_back({f.parent, f.child, f.table});
    auto it = seq_index_.find(f.child);
    if (it == seq_index_.end()) continue;
    it->second.first->seqs[size_t(it->second.second)].registered = true;
    std::vector<RequestId>& fg = building_.fork_groups;
    if (std::find(fg.begin(), fg.end(), it->second.first->id) == fg.end()) fg.push_back(it->second.first->id);
  }
  plan.copies.insert(plan.copies.end(), reply.copies.begin(), reply.copies.end());
  commit_running(reply, plan);
  commit_admitted(reply, plan);
  for (RequestId id : reply.never_fit) {
    auto it = groups_.find(id);
    if (it != groups_.end()) finish_never_fit(*it->second);
  }
  retire_finished();
  book_again_ = plan.empty() && !reply.preempted.empty();
  if (urgent_step_ && reply.admitted.empty()) {  // never again urgent: book at once, as usual
    urgent_miss_ = urgent_head_;
    book_again_ = true;
  }
  last_urgent_ = urgent_step_ && !reply.admitted.empty();
  if (last_urgent_) ++urgent_steps_;
  urgent_step_ = false;
  plan.releases.insert(plan.releases.end(), releases_.begin(), releases_.end());
  releases_.clear();
  plan.truncates.insert(plan.truncates.end(), truncates_.begin(), truncates_.end());
  truncates_.clear();
  if (plan.empty()) {  // nothing runs: the executor's state changes wait for the next plan
    retire_.push_back(reply.step_id);
    carry_ = std::move(plan);
    carry_groups_ = std::move(building_.fork_groups);
    return StepPlan{};
  }
  in_flight_.push_back(std::move(building_));
  return plan;
}

}  // namespace pagoda::actors
