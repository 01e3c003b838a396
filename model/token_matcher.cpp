#include "model/token_matcher.hpp"

#include <algorithm>

#include <dlpack/dlpack.h>

namespace pagoda::model {
namespace {

void clear_bit(uint32_t* words, int32_t t, int32_t vocab) {
  if (t >= 0 && t < vocab) words[t >> 5] &= ~(uint32_t(1) << (t & 31));
}

}  // namespace

void ConstraintProgram::finish() {
  allowed_words.clear();
  if (rules.allowed.empty()) return;
  allowed_words.assign(size_t(mask_words()), 0u);
  for (int32_t t : rules.allowed) {
    if (t >= 0 && t < vocab) allowed_words[size_t(t >> 5)] |= uint32_t(1) << (t & 31);
  }
}

TokenMatcher::TokenMatcher(std::shared_ptr<const ConstraintProgram> program) : prog_(std::move(program)) {
  if (prog_->grammar) {
    gm_.emplace(*prog_->grammar, prog_->stop_ids, /*terminate_without_stop_token=*/false);
  }
}

TokenMatcher::TokenMatcher(std::shared_ptr<const ConstraintProgram> program,
                           std::optional<xgrammar::GrammarMatcher> gm, std::vector<int32_t> history)
    : prog_(std::move(program)), gm_(std::move(gm)), history_(std::move(history)) {}

bool TokenMatcher::accept(int32_t id) {
  if (id < 0 || id >= prog_->vocab) return false;
  if (gm_ && !gm_->AcceptToken(id)) return false;
  history_.push_back(id);
  return true;
}

void TokenMatcher::rollback(int32_t n) {
  n = std::clamp(n, 0, num_accepted());
  if (n == 0) return;
  if (gm_) gm_->Rollback(n);
  history_.resize(history_.size() - size_t(n));
}

bool TokenMatcher::fill_mask(uint32_t* words) {
  if (!prog_->masks()) return false;
  const int32_t n = prog_->mask_words();
  if (gm_) {
    int64_t shape[1] = {n};
    DLTensor t{};
    t.data = words;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLInt, 32, 1};
    t.shape = shape;
    gm_->FillNextTokenBitmask(&t);
  } else {
    std::fill(words, words + n, ~uint32_t(0));
  }
  apply_rules(words);
  const int32_t tail = prog_->vocab & 31;  // ids past the vocabulary stay 0
  if (tail != 0) words[n - 1] &= (uint32_t(1) << tail) - 1;
  return true;
}

void TokenMatcher::apply_rules(uint32_t* words) const {
  const ConstraintProgram& p = *prog_;
  if (!p.allowed_words.empty()) {
    for (size_t i = 0; i < p.allowed_words.size(); ++i) words[i] &= p.allowed_words[i];
  }
  for (const std::vector<int32_t>& bad : p.rules.bad_sequences) {
    const size_t k = bad.size() - 1;  // the tokens before the banned last one
    if (k > history_.size()) continue;
    if (std::equal(bad.begin(), bad.begin() + ptrdiff_t(k), history_.end() - ptrdiff_t(k))) {
      clear_bit(words, bad.back(), p.vocab);
    }
  }
}

bool TokenMatcher::terminated() const { return gm_ && gm_->IsTerminated(); }

bool TokenMatcher::completed() const { return !gm_ || gm_->IsCompleted(); }

TokenMatcher TokenMatcher::fork() const {
  std::optional<xgrammar::GrammarMatcher> gm;
  if (gm_) gm.emplace(gm_->Fork());
  return TokenMatcher(prog_, std::move(gm), history_);
}

}  // namespace pagoda::model
