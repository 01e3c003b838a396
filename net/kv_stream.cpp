// KvStream and the `kv` frame (net/kv_stream.hpp).
#include "net/kv_stream.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "net/json_writer.hpp"

namespace pagoda::net {
namespace {

char state_char(actors::BlockState s) {
  switch (s) {
    case actors::BlockState::used: return 'u';
    case actors::BlockState::cached: return 'c';
    case actors::BlockState::free: break;
  }
  return 'f';
}

// What this socket may see: only its own requests (`mine`). Others' blocks
// show as in use ('u' in `state`) with no owner and ref 0; their sequences
// are counted in `others`, not listed (no ids, no tables: sharing between
// other clients' prompts is not a probe).
struct Visible {
  std::unordered_map<uint64_t, const actors::SeqOwner*> owner_of;  // my seqs only
  size_t others = 0;                                               // live seqs of other requests
};

Visible visible_seqs(const actors::KvSnapshot& snap, const KvOwnerIds& mine) {
  std::unordered_set<uint64_t> my_requests;
  for (const auto& [request, id] : mine) my_requests.insert(request);
  std::unordered_map<uint64_t, const actors::SeqOwner*> any_owner;
  for (const auto& o : snap.owners) any_owner[o.seq] = &o;
  Visible v;
  for (const auto& s : snap.pool.seqs) {
    auto it = any_owner.find(s.seq);
    if (it != any_owner.end() && my_requests.contains(it->second->request)) {
      v.owner_of[s.seq] = it->second;
    } else {
      ++v.others;
    }
  }
  return v;
}

void write_blocks(JsonWriter& w, const actors::KvSnapshot& snap, const Visible& v) {
  std::string states;
  states.reserve(snap.pool.blocks.size());
  for (const auto& b : snap.pool.blocks) states.push_back(state_char(b.state));
  w.key("state").value(states);
  // ref[b] and owners[b] count and list my sequences' tables only.
  std::vector<int32_t> refs(snap.pool.blocks.size(), 0);
  std::vector<std::vector<uint64_t>> owners(snap.pool.blocks.size());
  for (size_t b = 0; b < snap.pool.blocks.size(); ++b) {
    for (actors::SeqId s : snap.pool.blocks[b].seqs) {
      auto it = v.owner_of.find(s);
      if (it == v.owner_of.end()) continue;
      ++refs[b];
      owners[b].push_back(it->second->request);
    }
    std::sort(owners[b].begin(), owners[b].end());
    owners[b].erase(std::unique(owners[b].begin(), owners[b].end()), owners[b].end());
  }
  w.key("ref").begin_array();
  for (int32_t r : refs) w.value(r);
  w.end_array();
  w.key("owners").begin_array();
  for (const auto& list : owners) {
    w.begin_array();
    for (uint64_t r : list) w.value(r);
    w.end_array();
  }
  w.end_array();
}

void write_seqs(JsonWriter& w, const actors::KvSnapshot& snap, const Visible& v) {
  w.key("seqs").begin_array();
  for (const auto& s : snap.pool.seqs) {
    auto it = v.owner_of.find(s.seq);
    if (it == v.owner_of.end()) continue;
    w.begin_object().key("seq").value(uint64_t(s.seq));
    w.key("request").value(uint64_t(it->second->request)).key("index").value(it->second->index);
    w.key("tokens").value(s.num_tokens).key("table").begin_array();
    for (actors::BlockId b : s.table) w.value(int64_t(b));
    w.end_array().end_object();
  }
  w.end_array();
  w.key("others").value(uint64_t(v.others));
}

}  // namespace

std::string kv_frame(const actors::KvSnapshot& snap, const actors::EngineStats& stats, uint64_t seq,
                     const KvOwnerIds& mine) {
  const Visible visible = visible_seqs(snap, mine);
  const actors::PoolSnapshot& p = snap.pool;
  JsonWriter w;
  w.begin_object().key("type").value("kv").key("seq").value(seq);
  w.key("block_size").value(p.block_size).key("total").value(p.total_blocks);
  w.key("used").value(p.used_blocks).key("free").value(p.free_blocks);
  w.key("cached").value(p.cached_blocks).key("watermark").value(p.watermark_blocks);
  w.key("running").value(stats.running).key("waiting").value(stats.waiting);
  w.key("prefix_cache").begin_object();
  w.key("queried_tokens").value(p.stats.queried_tokens).key("hit_tokens").value(p.stats.hit_tokens);
  w.end_object();
  if (!snap.pools.empty()) {  // scale-out: one pool per engine node, as block ranges
    w.key("pools").begin_array();
    for (const actors::KvPoolRange& r : snap.pools) {
      w.begin_object().key("name").value(r.name).key("first").value(r.first_block);
      w.key("total").value(r.total_blocks).key("used").value(r.used_blocks);
      w.key("free").value(r.free_blocks).key("cached").value(r.cached_blocks).end_object();
    }
    w.end_array();
  }
  write_blocks(w, snap, visible);
  write_seqs(w, snap, visible);
  w.key("mine").begin_object();
  for (const auto& [request, id] : mine) w.key(std::to_string(request)).value(id);
  w.end_object();
  return w.end_object().take();
}

KvStream::KvStream(std::shared_ptr<actors::EngineClient> engine, std::shared_ptr<WsChannel> channel,
                   Options options, std::function<KvOwnerIds()> mine)
    : state_(std::make_shared<State>()) {
  state_->engine = std::move(engine);
  state_->channel = std::move(channel);
  state_->options = options;
  state_->mine = std::move(mine);
  thread_ = std::thread([state = state_] { run(state); });
}

KvStream::~KvStream() { stop(); }

void KvStream::stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

// The first read asks the scheduler for a fresh snapshot (Engine::kv_snapshot
// returns the last published one), so the first frame waits a moment for it.
void KvStream::run(const std::shared_ptr<State>& state) {
  constexpr std::chrono::milliseconds kFirstWait{20};
  (void)state->engine->kv_snapshot();
  uint64_t seq = 0;
  std::unique_lock<std::mutex> lock(state->mu);
  auto wait = std::min(kFirstWait, state->options.interval);
  while (!state->cv.wait_for(lock, wait, [&] { return state->stop; })) {
    lock.unlock();
    const bool open = send_one(*state, seq);
    lock.lock();
    if (!open) return;
    wait = state->options.interval;
  }
}

bool KvStream::send_one(State& state, uint64_t& seq) {
  if (state.channel->queued_bytes() > state.options.max_queued) return true;
  actors::KvSnapshot snap = state.engine->kv_snapshot();
  if (snap.pool.total_blocks == 0) return true;  // the scheduler has not published yet
  std::string frame = kv_frame(snap, state.engine->stats(), seq, state.mine());
  {
    std::lock_guard<std::mutex> lock(state.mu);
    if (state.stop) return true;
  }
  if (!state.channel->send_text(std::move(frame))) return false;
  ++seq;
  return true;
}

}  // namespace pagoda::net
