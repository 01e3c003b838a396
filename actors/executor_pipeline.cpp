// Executor, the pipelined step (see executor.hpp, "Pipelined steps"):
// prepare() on a free slot, launch() of the prepared slot, its device part
// on the step thread (or inline), finish(). prepare() of step N+1 may run
// while step N's device part does: it touches only the mirror, the arena's
// host rows and its own slot, none of which the device part reads.
#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <thread>

#include "actors/executor.hpp"
#include "actors/steady_ns.hpp"

namespace pagoda::actors {
namespace {

// fn's Error, or its exception as one (a step's code may throw: the
// injected faults, a bad_alloc).
template <typename T, typename F>
Result<T> guarded(uint64_t step, F&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return make_error(std::string("executor: ") + e.what());
  } catch (...) {
    return make_error("executor: an unknown exception in step " + std::to_string(step));
  }
}

}  // namespace

bool Executor::plain(const StepPlan& plan) const {
  return !book_.involves(plan) && plain_shape(plan);
}

bool Executor::plain_shape(const StepPlan& plan) const {
  if (draft_ || !plan.pre_forks.empty() || !plan.truncates.empty()) return false;
  for (const PlanSample& s : plan.samples) {
    if (s.row_back != 0) return false;
  }
  for (const PlanEntry& e : plan.entries) {
    if (e.num_drafts != 0) return false;
    if (e.num_placeholders == 0) continue;
    for (const SeqForkOp& f : plan.forks) {
      if (f.parent == e.seq) return false;
    }
  }
  return true;
}

bool Executor::can_prepare_ahead(const StepPlan& next) const {
  if (launched_ == nullptr || prepared_ != nullptr || !launched_->plain || !plain(next)) return false;
  // record() of the launched step would land in a sequence that started over.
  for (const PlanEntry& e : next.entries) {
    if (!e.fresh) continue;
    for (const PlanSample& s : launched_->run_plan().samples) {
      if (s.seq == e.seq) return false;
    }
  }
  return true;
}

Executor::Slot& Executor::free_slot() {
  return launched_ == &slots_[0] ? slots_[1] : slots_[0];
}

void Executor::prepare(StepPlan plan) {
  Slot& s = free_slot();
  s.plan = std::move(plan);
  s.rest = StepPlan{};
  s.has_rest = s.skip = s.device = false;
  s.error.reset();
  s.out = StepResult{};
  s.out.step_id = s.plan.step_id;
  s.placeholders.clear();
  s.ahead = launched_ != nullptr;
  s.book = book_.involves(s.plan);
  s.plain = !s.book && plain_shape(s.plan);
  prepared_ = &s;
  const int64_t t0 = steady_now_ns();
  if (s.plan.depends_on != 0 && failed(s.plan.depends_on)) {
    s.skip = true;  // nothing applied: launch() discards it
  } else if (int32_t(s.plan.samples.size()) > max_rows_ || int32_t(s.plan.entries.size()) > max_rows_) {
    s.error = make_error("executor: the plan has more rows than max_num_seqs + max_speculative_rows");
  } else if (auto ok = guarded<void>(s.plan.step_id, [&]() -> Result<void> {
               prepare_slot(s);
               return {};
             });
             !ok) {
    s.error = ok.error();
  }
  s.prep_ns = steady_now_ns() - t0;
}

// The mirror takes the plan (releases, tables, counts, placeholders; forks
// right after the entries, so that the next step's preparation sees the
// children), then the flattened batch.
void Executor::prepare_slot(Slot& s) {
  const StepPlan& plan = s.plan;
  if (draft_) draft_state(plan);
  mirror_->begin(plan, s.tokens, s.bad, s.out.errors, &s.placeholders);
  if (auto ok = fill_drafts(s); !ok) {
    s.error = ok.error();
    return;
  }
  if (s.book) book_.stage(plan, s.tokens, s.bad);
  mirror_->forks(plan, s.out.errors);
  mirror_->expect(plan);  // for a next step prepared before this one's ids are known
  build_rest(s);
  build_batch(s);
}

// Rare (an entry failed alone): run_plan() is the plan without it.
void Executor::build_rest(Slot& s) {
  s.has_rest = std::find(s.bad.begin(), s.bad.end(), uint8_t(1)) != s.bad.end();
  if (!s.has_rest) return;
  const StepPlan& plan = s.plan;
  StepPlan& rest = s.rest;
  rest = StepPlan{};
  rest.step_id = plan.step_id;
  std::vector<int32_t> entry_at(plan.entries.size(), -1);
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    if (s.bad[i]) continue;
    entry_at[i] = int32_t(rest.entries.size());
    rest.entries.push_back(plan.entries[i]);
  }
  for (const PlanSample& p : plan.samples) {
    if (entry_at[size_t(p.entry)] < 0) continue;
    rest.samples.push_back(p);
    rest.samples.back().entry = entry_at[size_t(p.entry)];
  }
}

void Executor::build_batch(Slot& s) {
  s.batch.clear(1);
  for (size_t i = 0; i < s.plan.entries.size(); ++i) {
    if (s.bad[i]) continue;
    const PlanEntry& e = s.plan.entries[i];
    const MirroredSeq* m = mirror_->find(e.seq);
    s.batch.add_sequence_row(s.tokens[i], e.num_cached, m == nullptr ? -1 : m->row, *tables_,
                             block_size(), /*want_logits=*/false);
  }
  const std::vector<int32_t>& starts = s.batch.query_start_loc;
  for (const PlanSample& p : s.run_plan().samples) {
    s.batch.logits_rows.push_back(starts[size_t(p.entry) + 1] - 1 - p.row_back);
  }
}

void Executor::resolve(Slot& s) {
  bool dropped = false, patched = false;
  // Prepared back to back with its launch, a step's entries are all still
  // mirrored; prepared ahead, the step before may have failed one alone.
  for (size_t i = 0; s.ahead && i < s.plan.entries.size(); ++i) {
    if (s.bad[i]) continue;
    const SeqId seq = s.plan.entries[i].seq;
    if (mirror_->find(seq) == nullptr) {
      s.bad[i] = 1;
      dropped = true;
      s.out.errors.push_back({seq, "executor: sequence " + std::to_string(seq) +
                                       " failed in the step before"});
    }
  }
  for (Placeholder& p : s.placeholders) {
    if (p.resolved || s.bad[size_t(p.entry)]) continue;
    const MirroredSeq* m = mirror_->find(p.seq);
    if (m->recorded_step != p.awaits) {  // its id never came (never: a sampled row records or fails)
      mirror_->erase(p.seq);
      s.bad[size_t(p.entry)] = 1;
      dropped = true;
      s.out.errors.push_back({p.seq, "executor: sequence " + std::to_string(p.seq) +
                                         " has no sampled id for its placeholder"});
      continue;
    }
    s.tokens[size_t(p.entry)][size_t(p.index)] = m->last_sampled;
    p.resolved = patched = true;
  }
  if (dropped) {  // rare: the batch without the rows that failed
    build_rest(s);
    build_batch(s);
    return;
  }
  if (!patched) return;
  // The flattened ids, patched in place: an entry's batch row is its index
  // less the failed entries before it (placeholders are in entry order).
  size_t e = 0, bad_before = 0;
  for (const Placeholder& p : s.placeholders) {
    for (; e < size_t(p.entry); ++e) bad_before += s.bad[e];
    if (s.bad[size_t(p.entry)]) continue;
    const int32_t at = s.batch.query_start_loc[size_t(p.entry) - bad_before] + p.index;
    s.batch.token_ids[size_t(at)] = s.tokens[size_t(p.entry)][size_t(p.index)];
  }
}

void Executor::undo(Slot& s) {
  for (const PlanEntry& e : s.plan.entries) mirror_->erase(e.seq);
  for (const SeqForkOp& f : s.plan.forks) mirror_->erase(f.child);
  mark_failed(s.plan.step_id);
}

std::optional<Result<StepResult>> Executor::launch(const LaunchHooks& hooks) {
  Slot& s = *prepared_;
  prepared_ = nullptr;
  last_ = &s;
  compute_ns_ = prep_ns_ = ahead_ns_ = mask_wait_ns_ = 0;
  step_start_ns_ = steady_now_ns();
  const bool doomed = s.plan.depends_on != 0 && failed(s.plan.depends_on);
  if (s.skip || doomed) {
    if (s.skip) {
      discard(s.plan);  // its releases still happen; it dooms its dependents
    } else {
      undo(s);  // prepared ahead of the step that then failed
    }
    StepResult r;
    r.step_id = s.plan.step_id;
    r.skipped = true;
    return Result<StepResult>(std::move(r));
  }
  if (s.error) {
    mark_failed(s.plan.step_id);
    return Result<StepResult>(*s.error);
  }
  auto started = guarded<bool>(s.plan.step_id, [&] { return stage_launch(s, hooks); });
  if (!started) {
    mark_failed(s.plan.step_id);
    return Result<StepResult>(started.error());
  }
  if (s.ahead) {
    ahead_ns_ = s.prep_ns;
  } else {
    prep_ns_ += s.prep_ns;
  }
  launched_ = &s;
  if (!*started) return finish();  // no entries: nothing to run
  s.device = true;
  if (hooks.inline_device) {
    device_part(s, hooks);
    return finish();
  }
  if (!step_thread_) step_thread_ = std::make_unique<JobThread>();
  step_thread_->start([this, &s, hooks] {
    device_part(s, hooks);
    if (hooks.done) hooks.done(s.plan.step_id);
  });
  return std::nullopt;
}

Result<bool> Executor::stage_launch(Slot& s, const LaunchHooks& hooks) {
  // The set of the step before last: a step that sampled nothing did not
  // synchronize, so its staged uploads may still be queued.
  staging_set_ ^= 1;
  staging_[staging_set_].wait_writable();
  staged_ = 0;
  resolve(s);
  book_active_ = s.book;
  if (hooks.inject) hooks.inject();
  if (auto ok = tables_->sync(*backend_); !ok) return ok.error();
  if (auto ok = run_copies(s.plan); !ok) return ok.error();
  const StepPlan& plan = s.run_plan();
  if (plan.entries.empty()) {
    if (s.book) book_.prepare();  // the releases
    prep_ns_ = steady_now_ns() - step_start_ns_;
    return false;
  }
  // A constrained step stages its rows after the masks (device_part).
  if (!s.book && !plan.samples.empty()) {
    if (auto ok = stage_rows(plan, &want_top_); !ok) return ok.error();
  }
  auto staged = model_->stage_forward(s.batch, cache_);
  if (!staged) return staged.error();
  staged_forward_ = *staged;
  prep_ns_ = steady_now_ns() - step_start_ns_;
  // The masks of this step's rows are filled while the forward pass runs.
  if (s.book) start_masks();
  return true;
}

// The step thread (or the caller's, inline). Writes only device memory,
// host_out_, s.out's errors (the masks') and the step's timings.
void Executor::device_part(Slot& s, const LaunchHooks& hooks) {
  const StepPlan& plan = s.run_plan();
  struct Join {  // the masks are waited for on every way out
    JobThread* f;
    ~Join() { if (f) f->wait(); }
  } join{s.book ? filler_.get() : nullptr};
  auto ok = guarded<void>(plan.step_id, [&]() -> Result<void> {
    if (hooks.delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(hooks.delay_s));
    const int64_t t0 = steady_now_ns();
    auto logits = model_->issue_forward(staged_forward_, cache_);
    if (!logits) return logits.error();
    // On the CPU the pass has run; on CUDA it is queued. Either way what is
    // left of the step is its sampling (set_progress).
    if (hooks.issued) {
      hooks.issued(plan.step_id);
    } else if (progress_) {
      progress_(plan.step_id);
    }
    compute_ns_ = steady_now_ns() - t0;
    if (join.f != nullptr) {
      join.f = nullptr;
      finish_masks(s.out);
    }
    if (plan.samples.empty()) return {};
    const int64_t t1 = steady_now_ns();
    // Nothing is prepared while a constrained step runs: the mirror is free.
    if (s.book) {
      if (auto staged = stage_rows(plan, &want_top_); !staged) return staged;
    }
    if (auto sampled = issue_sample(plan, *logits); !sampled) return sampled;
    compute_ns_ += steady_now_ns() - t1;
    return {};
  });
  if (!ok) device_error_ = ok.error();
}

Result<StepResult> Executor::finish() {
  Slot& s = *launched_;
  launched_ = nullptr;
  if (s.device && step_thread_) step_thread_->wait();  // its writes are visible from here
  if (device_error_) {
    Error e = std::move(*device_error_);
    device_error_.reset();
    mark_failed(s.plan.step_id);
    return e;
  }
  auto ok = guarded<void>(s.plan.step_id, [&] { return finish_slot(s); });
  if (!ok) {
    mark_failed(s.plan.step_id);
    return ok.error();
  }
  return std::move(s.out);
}

// The run plan's samples checked and recorded, then spread over the plan's
// (a row of an entry that failed alone carries token -1).
Result<void> Executor::finish_slot(Slot& s) {
  const StepPlan& plan = s.run_plan();
  if (!s.device || plan.samples.empty()) return {};
  StepResult part;
  unpack(plan, part);
  check_samples(part);
  if (s.book) drop_failed_rows(part);
  sampled_.clear();
  for (const SampleOutput& o : part.samples) sampled_.push_back(o.token);
  mirror_->record(plan, sampled_);
  if (s.book) book_.record(plan, sampled_);
  // Later plans naming a failed row's sequence fail alone.
  for (const SeqError& e : part.errors) mirror_->erase(e.seq);
  if (s.book) {
    for (const SeqError& e : book_.errors()) mirror_->erase(e.seq);
    for (const SeqError& e : part.errors) book_.erase(e.seq);
    for (const SeqError& e : book_.errors()) book_.erase(e.seq);
  }
  s.out.errors.insert(s.out.errors.end(), part.errors.begin(), part.errors.end());
  if (!s.has_rest) {
    s.out.samples = std::move(part.samples);
    return {};
  }
  size_t next = 0;
  for (size_t i = 0; i < s.plan.samples.size(); ++i) {
    const PlanSample& p = s.plan.samples[i];
    if (!s.bad[size_t(p.entry)]) {
      s.out.samples.push_back(std::move(part.samples[next++]));
    } else {
      SampleOutput failed;
      failed.seq = p.seq;
      s.out.samples.push_back(std::move(failed));
    }
  }
  return {};
}

}  // namespace pagoda::actors
