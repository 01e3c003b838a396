#include "actors/block_booking.hpp"

#include <algorithm>

namespace pagoda::actors {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

BookingReply BlockBooker::book(const BookingRequest& r) {
  BookingReply out;
  out.step_id = r.step_id;
  prelude(r, out);
  open_steps_.insert(r.step_id);
  int32_t budget = r.budget, slots = 0;
  bool preempted = false;
  book_running(r, out, budget, slots, preempted);
  size_t booked = 0;
  for (const GroupBooked& g : out.running) booked += g.seqs.size();
  // After a preemption nothing new is admitted (the freed blocks go to the
  // running groups first), unless nothing was booked at all.
  if (!preempted || booked == 0) admit(r, out, budget, slots);
  out.stats = stats();
  return out;
}

void BlockBooker::prelude(const BookingRequest& r, BookingReply& out) {
  for (uint64_t step : r.retire_steps) {
    step_log_.erase(step);
    open_steps_.erase(step);
  }
  for (uint64_t step : r.abandon_steps) {
    open_steps_.erase(step);
    auto it = step_log_.find(step);
    if (it == step_log_.end()) continue;
    (void)blocks_.unregister(it->second);
    step_log_.erase(it);
  }
  for (const TokenCommit& c : r.commits) {
    if (!blocks_.contains(c.seq)) continue;  // freed meanwhile
    if (auto ok = blocks_.commit(c.seq, c.position, c.token); !ok) {
      out.failures.push_back({owners_.contains(c.seq) ? owners_[c.seq].request : 0, c.seq,
                              ok.error().message});
      continue;
    }
    auto p = pending_step_.find(c.seq);
    if (p != pending_step_.end()) {
      log_registered(p->second);
      if (blocks_.num_pending(c.seq) == 0) pending_step_.erase(p);
    }
  }
  for (const SeqRollback& b : r.rollbacks) {
    if (!blocks_.contains(b.seq)) continue;  // freed meanwhile
    if (auto ok = blocks_.rollback(b.seq, b.num_tokens); !ok) {
      out.failures.push_back({owners_.contains(b.seq) ? owners_[b.seq].request : 0, b.seq,
                              ok.error().message});
      continue;
    }
    if (blocks_.num_pending(b.seq) == 0) pending_step_.erase(b.seq);
  }
  for (SeqId s : r.frees) free_seq(s);
  for (const SeqFork& f : r.forks) {
    auto owner = owners_.find(f.parent);
    const RequestId group = owner == owners_.end() ? 0 : owner->second.request;
    auto copies = blocks_.fork(f.parent, f.child);
    if (!copies) {  // contiguous layout without room: the group is recomputed
      free_group(group);
      out.preempted.push_back(group);
      continue;
    }
    out.copies.insert(out.copies.end(), copies->begin(), copies->end());
    SeqFork done{f.parent, f.child, {}};
    if (blocks_.config().layout == KvLayout::contiguous) {
      std::span<const BlockId> t = blocks_.block_table(f.child);
      done.table.assign(t.begin(), t.end());
    }
    out.forks.push_back(std::move(done));
    own(f.child, group, 0);
  }
  for (const SeqOwner& o : r.owners) own(o.seq, o.request, o.index);
}

void BlockBooker::book_running(const BookingRequest& r, BookingReply& out, int32_t& budget,
                               int32_t& slots, bool& preempted) {
  std::vector<bool> gone(r.running.size(), false);
  for (size_t i = 0; i < r.running.size(); ++i) {
    if (std::find(out.preempted.begin(), out.preempted.end(), r.running[i].group) !=
        out.preempted.end()) {
      gone[i] = true;  // a prelude fork failed
    }
  }
  size_t tail = r.running.size();  // victims are taken from before this index
  for (size_t i = 0; i < r.running.size() && i < tail; ++i) {
    if (gone[i]) continue;
    const GroupAppend& g = r.running[i];
    std::vector<SeqId> ids;
    int32_t most = 0;
    bool known = true;
    for (const SeqAppend& s : g.seqs) {
      ids.push_back(s.seq);
      most = std::max(most, int32_t(s.tokens.size()) + s.pending);
      known = known && blocks_.contains(s.seq);
    }
    bool self = false;
    while (!ids.empty() && (!known || !blocks_.can_append(ids, most))) {
      while (tail > i && gone[tail - 1]) --tail;
      const size_t victim = tail - 1;
      free_group(r.running[victim].group);
      out.preempted.push_back(r.running[victim].group);
      gone[victim] = true;
      preempted = true;
      if (victim == i) {
        self = true;
        break;
      }
      tail = victim;
    }
    if (self) break;
    GroupBooked booked;
    booked.group = g.group;
    if (!append_group(g, booked, out, r.step_id)) continue;
    for (const SeqBooked& s : booked.seqs) budget -= s.num_tokens;
    slots += g.slots;
    out.running.push_back(std::move(booked));
  }
  for (size_t i = tail; i < r.running.size(); ++i) {
    if (!gone[i]) slots += r.running[i].slots;  // not reached: still running, idle this step
  }
  log_registered(r.step_id);
}

// Books every sequence of g (can_append said yes). False when g has nothing.
bool BlockBooker::append_group(const GroupAppend& g, GroupBooked& out, BookingReply& reply,
                               uint64_t step) {
  AppendResult scratch;
  for (const SeqAppend& s : g.seqs) {
    const int32_t before = blocks_.num_tokens(s.seq);
    // Sliding window: the blocks no query from `before` on reads go back.
    // Safe with a step in flight: it reads them before any step booked from
    // now on (which alone can write a block taken again) runs.
    blocks_.release_outside_window(s.seq, before);
    const size_t table_before = blocks_.block_table(s.seq).size();
    scratch.slots.clear();
    scratch.copies.clear();
    auto ok = blocks_.append_slots(s.seq, s.tokens, scratch);
    if (ok) ok = blocks_.append_pending(s.seq, s.pending, scratch);
    if (!ok) {
      reply.failures.push_back({g.group, s.seq, ok.error().message});
      continue;
    }
    if (s.pending > 0) pending_step_[s.seq] = step;
    reply.copies.insert(reply.copies.end(), scratch.copies.begin(), scratch.copies.end());
    std::span<const BlockId> table = blocks_.block_table(s.seq);
    const size_t from = scratch.copies.empty() ? table_before : table_before - 1;
    SeqBooked b;
    b.seq = s.seq;
    b.num_cached = before;
    b.num_tokens = int32_t(s.tokens.size()) + s.pending;
    b.delta.from = int32_t(std::min(from, table.size()));
    b.delta.blocks.assign(table.begin() + b.delta.from, table.end());
    out.seqs.push_back(std::move(b));
  }
  if (!g.fork_children.empty() && !g.seqs.empty()) {
    fork_children(g.group, g.seqs[0].seq, g.fork_children, out, reply);
  }
  return !out.seqs.empty() || !out.forks.empty();
}

void BlockBooker::fork_children(RequestId group, SeqId parent, const std::vector<SeqId>& children,
                                GroupBooked& out, BookingReply& reply) {
  int32_t index = 1;
  for (SeqId c : children) {
    auto copies = blocks_.fork(parent, c);
    if (!copies) {
      reply.failures.push_back({group, c, copies.error().message});
      continue;
    }
    reply.copies.insert(reply.copies.end(), copies->begin(), copies->end());
    SeqFork done{parent, c, {}};
    if (blocks_.config().layout == KvLayout::contiguous) {
      std::span<const BlockId> t = blocks_.block_table(c);
      done.table.assign(t.begin(), t.end());
    }
    out.forks.push_back(std::move(done));
    own(c, group, index++);
  }
}

void BlockBooker::admit(const BookingRequest& r, BookingReply& out, int32_t budget, int32_t slots) {
  for (const GroupAdmit& g : r.waiting) {
    if (budget <= 0) return;
    if (g.seqs.empty()) continue;
    if (slots + g.slots > r.max_num_seqs) return;
    if (budget < int32_t(g.seqs.size())) return;
    const AllocStatus fits = group_fits(g);
    if (fits == AllocStatus::later) return;
    if (fits == AllocStatus::never) {
      out.never_fit.push_back(g.group);
      continue;
    }
    if (admit_group(g, budget, out)) slots += g.slots;
  }
  log_registered(r.step_id);
}

// Whether all live sequences of g can be allocated together now.
AllocStatus BlockBooker::group_fits(const GroupAdmit& g) const {
  const int32_t bs = blocks_.block_size();
  int64_t need = 0;
  AllocStatus worst = AllocStatus::ok;
  for (const SeqAdmit& s : g.seqs) {
    const AllocStatus st = blocks_.can_allocate(*s.tokens);
    if (st == AllocStatus::never) return st;
    if (st == AllocStatus::later) worst = st;
    // +1: the slot of the token it samples next. Without it a group that
    // fills the whole pool would be admitted, preempted at its next decode
    // and re-admitted forever without progress.
    need += ceil_div(int64_t(s.tokens->size()) + 1, bs);
  }
  const BlockManagerConfig& c = blocks_.config();
  if (g.beam && g.seqs.size() > 1 && c.layout == KvLayout::paged && c.enable_prefix_caching) {
    // Recomputed beams re-share the full blocks of their common prefix.
    const std::vector<TokenId>& first = *g.seqs[0].tokens;
    size_t common = first.size();
    for (const SeqAdmit& s : g.seqs) {
      const auto diff = std::mismatch(s.tokens->begin(), s.tokens->end(), first.begin(), first.end());
      common = std::min(common, size_t(diff.first - s.tokens->begin()));
    }
    need -= int64_t(common / size_t(bs)) * int64_t(g.seqs.size() - 1);
  }
  const int64_t usable = blocks_.total_blocks() - blocks_.watermark_blocks();
  if (need > usable) return AllocStatus::never;
  const int64_t available = blocks_.num_free_blocks() + blocks_.num_cached_blocks() -
                            blocks_.watermark_blocks();
  if (g.seqs.size() > 1 && need > available) worst = AllocStatus::later;
  return worst;
}

bool BlockBooker::admit_group(const GroupAdmit& g, int32_t& budget, BookingReply& out) {
  GroupBooked booked;
  booked.group = g.group;
  for (size_t k = 0; k < g.seqs.size(); ++k) {
    const SeqAdmit& s = g.seqs[k];
    const int32_t reserve = int32_t(g.seqs.size() - k - 1);  // one token each for the rest
    auto a = blocks_.allocate(s.seq, *s.tokens, std::max(1, budget - reserve));
    if (!a) {  // group_fits said yes; not expected
      out.failures.push_back({g.group, s.seq, a.error().message});
      continue;
    }
    own(s.seq, g.group, s.index);
    SeqBooked b;
    b.seq = s.seq;
    b.num_cached = a->num_cached_tokens;
    b.num_tokens = int32_t(a->slots.size());
    std::span<const BlockId> table = blocks_.block_table(s.seq);
    b.delta.blocks.assign(table.begin(), table.end());
    budget -= b.num_tokens;
    const bool complete = b.num_cached + b.num_tokens == int32_t(s.tokens->size());
    booked.seqs.push_back(std::move(b));
    if (k == 0 && complete && !g.fork_children.empty()) {
      fork_children(g.group, s.seq, g.fork_children, booked, out);
    }
  }
  const bool any = !booked.seqs.empty();
  out.admitted.push_back(std::move(booked));
  return any;
}

void BlockBooker::free_seq(SeqId seq) {
  if (blocks_.contains(seq)) (void)blocks_.free(seq);
  pending_step_.erase(seq);
  auto it = owners_.find(seq);
  if (it == owners_.end()) return;
  auto g = group_seqs_.find(it->second.request);
  if (g != group_seqs_.end()) {
    std::erase(g->second, seq);
    if (g->second.empty()) group_seqs_.erase(g);
  }
  owners_.erase(it);
}

void BlockBooker::free_group(RequestId group) {
  auto it = group_seqs_.find(group);
  if (it == group_seqs_.end()) return;
  const std::vector<SeqId> seqs = it->second;
  for (SeqId s : seqs) free_seq(s);
}

void BlockBooker::own(SeqId seq, RequestId group, int32_t index) {
  auto [it, fresh] = owners_.try_emplace(seq, SeqOwner{seq, group, index});
  if (!fresh) {
    if (it->second.request != group) {
      std::erase(group_seqs_[it->second.request], seq);
      group_seqs_[group].push_back(seq);
    }
    it->second = SeqOwner{seq, group, index};
    return;
  }
  group_seqs_[group].push_back(seq);
}

// A registration whose step has ended (it ran: the contents are written)
// needs no log.
void BlockBooker::log_registered(uint64_t step) {
  std::vector<BlockRef> fresh = blocks_.take_registered();
  if (fresh.empty() || !open_steps_.contains(step)) return;
  std::vector<BlockRef>& log = step_log_[step];
  log.insert(log.end(), fresh.begin(), fresh.end());
}

BlockStats BlockBooker::stats() const {
  BlockStats s;
  s.total = blocks_.total_blocks();
  s.used = blocks_.num_used_blocks();
  s.free = blocks_.num_free_blocks();
  s.cached = blocks_.num_cached_blocks();
  s.watermark = blocks_.watermark_blocks();
  s.block_size = blocks_.block_size();
  s.stored_tokens = blocks_.stored_tokens();
  s.window_released = blocks_.window_released_blocks();
  s.prefix = blocks_.prefix_cache_stats();
  return s;
}

KvCapture BlockBooker::capture() const {
  KvCapture out;
  out.pool = blocks_.capture();
  out.owners.reserve(out.pool.seqs.size());
  for (const SeqSnapshot& s : out.pool.seqs) {
    auto it = owners_.find(s.seq);
    out.owners.push_back(it == owners_.end() ? SeqOwner{s.seq, 0, 0} : it->second);
  }
  return out;
}

KvSnapshot BlockBooker::snapshot() const { return assemble(capture()); }

KvSnapshot assemble(KvCapture c) {
  auto by_seq = [](const SeqOwner& x, const SeqOwner& y) { return x.seq < y.seq; };
  std::sort(c.owners.begin(), c.owners.end(), by_seq);
  KvSnapshot out;
  out.pool = assemble(std::move(c.pool));
  out.owners = std::move(c.owners);  // pool.seqs ascending: the same order
  return out;
}

}  // namespace pagoda::actors
