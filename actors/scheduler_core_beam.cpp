// SchedulerCore's beam-search part (see scheduler_core.hpp and
// actors/beam_search.hpp): each live beam is a sequence; its greedy row
// reports the beam's best tokens; once every live beam has sampled, the
// BeamSearch ranks them and the group's sequences are rebuilt from the
// surviving parents: parents without a child are freed first, a parent's
// first child takes over the parent's sequence (same SeqId, same blocks),
// further children fork from it (BlockManager::fork: every block shared, the
// partly filled last one copied on the next append). So shared history stays
// shared, and a beam group never holds more than k sequences.
#include <algorithm>

#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

std::shared_ptr<BeamState> SchedulerCore::make_beam_state(const SamplingOptions& o,
                                                          int32_t prompt_len) const {
  BeamConfig c;
  c.beam_width = o.beam_width;
  c.length_penalty = o.length_penalty;
  c.early_stopping = o.early_stopping;
  c.max_new_tokens = std::min(o.max_tokens, config_.max_model_len - prompt_len);
  c.min_new_tokens = o.min_tokens;
  c.stop_tokens = o.stop_token_ids;
  if (!o.ignore_eos) {
    c.stop_tokens.insert(c.stop_tokens.end(), config_.eos_token_ids.begin(),
                         config_.eos_token_ids.end());
  }
  const int32_t wanted = BeamSearch::candidates_per_beam(c);
  auto st = std::make_shared<BeamState>(std::move(c));
  st->num_candidates = std::min(wanted, gpu::kMaxTopLogprobs);
  st->pending.resize(1);
  st->has_pending.assign(1, false);
  return st;
}

void SchedulerCore::store_beam_sample(SequenceGroup& g, const Sequence& s, const SampleOutput& out) {
  BeamState& b = *g.beam;
  const size_t slot = size_t(s.index);
  if (slot >= b.pending.size()) return;
  std::vector<BeamToken>& c = b.pending[slot];
  c.clear();
  for (size_t i = 0; i < out.top_tokens.size() && i < out.top_logprobs.size(); ++i) {
    if (out.top_tokens[i] < 0) continue;  // a masked row has fewer candidates (issue 23)
    c.push_back({out.top_tokens[i], out.top_logprobs[i]});
  }
  if (c.empty()) c.push_back({out.token, out.logprob});  // no candidates reported: the greedy token
  b.has_pending[slot] = true;
}

void SchedulerCore::beam_step(SequenceGroup& g) {
  BeamState& b = *g.beam;
  tokens_generated_ += b.pending.size();  // one row sampled per live beam
  fair_.charge_output(g.options.client, int64_t(b.pending.size()));
  Result<std::vector<int32_t>> parents = b.search.step(b.pending);
  if (!parents) {
    for (Sequence& s : g.seqs) finish_seq(g, s, FinishReason::error, parents.error().message);
    return;
  }
  SeqEvent ev;
  ev.request = g.id;
  ev.has_token = true;
  ev.beam = true;
  ev.beam_final = b.search.done();
  ev.beams = b.search.ranked();
  events_.push_back(std::move(ev));
  if (b.search.done()) {
    for (Sequence& s : g.seqs) finish_seq(g, s, FinishReason::stop, {}, /*emit=*/false);
    return;
  }
  replace_beams(g, *parents);
}

void SchedulerCore::replace_beams(SequenceGroup& g, const std::vector<int32_t>& parents) {
  BeamState& b = *g.beam;
  const std::vector<LiveBeam>& live = b.search.live();
  std::vector<int32_t> children(g.seqs.size(), 0);
  for (int32_t p : parents) ++children[size_t(p)];
  for (size_t p = 0; p < g.seqs.size(); ++p) {  // dead beams first: their blocks may serve forks
    if (children[p] > 0) continue;
    frees_.push_back(g.seqs[p].id);
    release_seq(g.seqs[p].id);
    seq_index_.erase(g.seqs[p].id);
  }
  std::vector<Sequence> next(parents.size());
  std::vector<bool> taken(g.seqs.size(), false);
  for (size_t j = 0; j < parents.size(); ++j) {  // first children take their parent's sequence
    const size_t p = size_t(parents[j]);
    if (taken[p]) continue;
    taken[p] = true;
    next[j] = std::move(g.seqs[p]);
    next[j].tokens.push_back(live[j].tokens.back());
  }
  for (size_t j = 0; j < parents.size(); ++j) {
    if (!next[j].tokens.empty()) continue;
    const Sequence& parent = next[size_t(std::find(parents.begin(), parents.end(), parents[j]) -
                                         parents.begin())];
    Sequence& c = next[j];
    c.id = next_seq_id_++;
    c.prompt_len = parent.prompt_len;
    c.tokens.assign(parent.tokens.begin(), parent.tokens.end() - 1);
    c.tokens.push_back(live[j].tokens.back());
    c.seed = parent.seed;
    c.status = SeqStatus::running;
    c.num_computed = parent.num_computed;
    c.num_scheduled = parent.num_scheduled;
    c.registered = false;  // until the plan's pre_fork gives the executor its state
    // The booker forks it first thing in the next booking (a failure there,
    // possible only in the contiguous layout, preempts the group).
    beam_forks_.push_back({parent.id, c.id, {}});
  }
  for (size_t j = 0; j < next.size(); ++j) {
    next[j].index = int32_t(j);
    seq_index_[next[j].id] = {&g, int32_t(j)};
    owners_.push_back({next[j].id, g.id, int32_t(j)});
  }
  g.seqs = std::move(next);
  g.forked = true;
  b.pending.assign(g.seqs.size(), {});
  b.has_pending.assign(g.seqs.size(), false);
}

}  // namespace pagoda::actors
