#include "actors/beam_search.hpp"

#include <algorithm>
#include <cmath>

namespace pagoda::actors {

BeamSearch::BeamSearch(BeamConfig config) : config_(std::move(config)) {
  config_.beam_width = std::max(config_.beam_width, 1);
  config_.max_new_tokens = std::max(config_.max_new_tokens, 1);
  std::sort(config_.stop_tokens.begin(), config_.stop_tokens.end());
  config_.stop_tokens.erase(std::unique(config_.stop_tokens.begin(), config_.stop_tokens.end()),
                            config_.stop_tokens.end());
  live_.resize(1);
}

int32_t BeamSearch::candidates_per_beam(const BeamConfig& c) {
  const int32_t k = std::max(c.beam_width, 1);
  return std::max(2 * k, k + int32_t(c.stop_tokens.size()));
}

bool BeamSearch::is_stop(TokenId t) const {
  return std::binary_search(config_.stop_tokens.begin(), config_.stop_tokens.end(), t);
}

double BeamSearch::score(double cumulative_logprob, int32_t length) const {
  return cumulative_logprob / std::pow(double(std::max(length, 1)), double(config_.length_penalty));
}

// Every admissible candidate of every live beam, best cumulative first; the
// best max(2, 1 + #stop) * k of them.
std::vector<BeamSearch::Candidate> BeamSearch::rank(
    const std::vector<std::vector<BeamToken>>& candidates) const {
  const bool stops_allowed = generated_ >= config_.min_new_tokens;
  std::vector<Candidate> all;
  for (size_t b = 0; b < candidates.size(); ++b) {
    for (const BeamToken& t : candidates[b]) {
      if (t.token < 0 || !std::isfinite(t.logprob)) continue;
      if (!stops_allowed && is_stop(t.token)) continue;
      all.push_back({int32_t(b), t.token, live_[b].cumulative_logprob + double(t.logprob)});
    }
  }
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.cumulative != b.cumulative) return a.cumulative > b.cumulative;
    if (a.beam != b.beam) return a.beam < b.beam;
    return a.token < b.token;
  });
  const size_t keep = size_t(std::max<int32_t>(2, 1 + int32_t(config_.stop_tokens.size()))) *
                      size_t(config_.beam_width);
  if (all.size() > keep) all.resize(keep);
  return all;
}

// Hitting candidates among the first k ranks join the finished list (unless
// it is closed); the list keeps the k best, older first on equal scores.
void BeamSearch::add_finished(const std::vector<Candidate>& ranked, int32_t new_len) {
  const size_t k = size_t(config_.beam_width);
  const bool full = finished_.size() >= k && config_.early_stopping;
  if (full || !improvable_) return;
  const bool at_max = new_len >= config_.max_new_tokens;
  for (size_t r = 0; r < ranked.size() && r < k; ++r) {
    const Candidate& c = ranked[r];
    const bool stop = is_stop(c.token);
    if (!stop && !at_max) continue;
    BeamResult h;
    h.tokens = live_[size_t(c.beam)].tokens;
    h.tokens.push_back(c.token);
    h.cumulative_logprob = c.cumulative;
    h.score = score(c.cumulative, new_len);
    h.finish = stop ? FinishReason::stop : FinishReason::length;
    finished_.push_back(std::move(h));
  }
  std::stable_sort(finished_.begin(), finished_.end(),
                   [](const BeamResult& a, const BeamResult& b) { return a.score > b.score; });
  if (finished_.size() > k) finished_.resize(k);
}

void BeamSearch::update_heuristic() {
  if (!improvable_ || live_.empty()) return;
  if (finished_.size() < size_t(config_.beam_width)) return;  // an open slot: improvable
  const double best_possible = score(live_[0].cumulative_logprob, generated_);
  improvable_ = best_possible > finished_.back().score;
}

Result<std::vector<int32_t>> BeamSearch::step(const std::vector<std::vector<BeamToken>>& candidates) {
  if (done_) return make_error("beam search: step() after the search is done");
  if (candidates.size() != live_.size()) {
    return make_error("beam search: expected candidates for " + std::to_string(live_.size()) +
                      " beams, got " + std::to_string(candidates.size()));
  }
  const std::vector<Candidate> ranked = rank(candidates);
  const int32_t new_len = generated_ + 1;
  add_finished(ranked, new_len);
  const bool at_max = new_len >= config_.max_new_tokens;
  std::vector<LiveBeam> next;
  std::vector<int32_t> parents;
  for (const Candidate& c : ranked) {
    if (next.size() == size_t(config_.beam_width)) break;
    if (at_max || is_stop(c.token)) continue;
    LiveBeam nb;
    nb.tokens = live_[size_t(c.beam)].tokens;
    nb.tokens.push_back(c.token);
    nb.cumulative_logprob = c.cumulative;
    next.push_back(std::move(nb));
    parents.push_back(c.beam);
  }
  live_ = std::move(next);
  generated_ = new_len;
  update_heuristic();
  const bool all_finished = finished_.size() >= size_t(config_.beam_width);
  done_ = live_.empty() || !improvable_ || (config_.early_stopping && all_finished);
  if (done_) live_.clear();
  return parents;
}

std::vector<BeamResult> BeamSearch::ranked() const {
  std::vector<BeamResult> out = finished_;
  for (const LiveBeam& b : live_) {
    BeamResult r;
    r.tokens = b.tokens;
    r.cumulative_logprob = b.cumulative_logprob;
    r.score = score(b.cumulative_logprob, int32_t(b.tokens.size()));
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const BeamResult& a, const BeamResult& b) { return a.score > b.score; });
  return out;
}

std::vector<BeamResult> BeamSearch::best(int32_t n) const {
  std::vector<BeamResult> out(finished_.begin(),
                              finished_.begin() + std::min<ptrdiff_t>(n, ptrdiff_t(finished_.size())));
  std::vector<BeamResult> rest = ranked();
  for (BeamResult& r : rest) {
    if (int32_t(out.size()) >= n) break;
    if (r.finish != FinishReason::none) continue;
    r.finish = FinishReason::abort;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace pagoda::actors
