#include "actors/scale_out/engine_router.hpp"

#include <caf/io/all.hpp>

#include <algorithm>
#include <deque>
#include <iostream>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "actors/engine_errors.hpp"
#include "actors/latency_tracker.hpp"
#include "actors/messages.hpp"

namespace pagoda::actors {

namespace {

using reconnect_atom = caf::atom_constant<caf::atom("reconnect")>;
using poll_atom = caf::atom_constant<caf::atom("poll")>;

struct Slot {
  NodeAddress addr;
  caf::actor entry;  // null while down
  bool up = false, connecting = false, tried = false;
  uint64_t epoch = 0;  // bumped when it goes up or down: late replies are dropped
  NodeHello hello;
  NodeReport report;
  std::unordered_set<uint64_t> cached;  // the last report's hashes + `routed_hashes`
  // Hashes of prompts sent here lately: kept over reports for kRecentRoutes
  // (a report may have been built before the node saw them).
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::vector<uint64_t>>> routed_hashes;
  int32_t in_flight = 0, missed = 0;
  std::string error;
  uint64_t routed = 0, prefix_routed = 0;
};

struct Pending {
  caf::actor actor;  // the request actor
  AddGroup add;
  int32_t node = -1;
  uint64_t wire = 0;  // 0: not on a node
  bool streamed = false;
  int32_t retries = 0;
};

struct RouterState {
  std::vector<Slot> nodes;
  std::unordered_map<RequestId, Pending> requests;
  std::map<caf::actor_addr, RequestId> by_addr;
  std::unordered_map<uint64_t, RequestId> wires;
  uint64_t next_wire = 1;
  RouterConfig config;
  std::shared_ptr<RouterBox> box;
  size_t rotation = 0;
  bool stopping = false;
  std::vector<caf::response_promise> stop_waiters;
  std::optional<NodeHello> reference;  // the first node that came up
  LatencyTracker latency;  // the front end's TTFT / ITL (the hop to the node included)
};
using Self = caf::stateful_actor<RouterState>*;

constexpr std::chrono::seconds kRecentRoutes{2};

// A report's cached hashes, plus those of the prompts routed here lately.
void set_cached(Slot& n, const std::vector<uint64_t>& reported) {
  const auto now = std::chrono::steady_clock::now();
  while (!n.routed_hashes.empty() && now - n.routed_hashes.front().first > kRecentRoutes) {
    n.routed_hashes.pop_front();
  }
  n.cached = std::unordered_set<uint64_t>(reported.begin(), reported.end());
  for (const auto& [when, hashes] : n.routed_hashes) n.cached.insert(hashes.begin(), hashes.end());
}

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1000.0)); }

void publish(Self self) {
  std::vector<NodeStatus> out;
  for (const Slot& n : self->state.nodes) {
    out.push_back(NodeStatus{n.addr.name(), n.up, n.tried, n.error, n.hello, n.report, n.routed, n.prefix_routed});
  }
  self->state.box->set_nodes(std::move(out));
}

void answer_stop(Self self) {
  auto& st = self->state;
  if (!st.stopping || !st.requests.empty()) return;
  for (caf::response_promise& rp : st.stop_waiters) rp.deliver(true);
  st.stop_waiters.clear();
}

// Forgets a request (its node holds nothing more of it, or was told to drop it).
void forget(Self self, RequestId id) {
  auto& st = self->state;
  auto it = st.requests.find(id);
  if (it == st.requests.end()) return;
  Pending& p = it->second;
  if (p.wire != 0) {
    st.wires.erase(p.wire);
    if (p.node >= 0) --st.nodes[size_t(p.node)].in_flight;
  }
  self->demonitor(p.actor);
  st.by_addr.erase(p.actor.address());
  st.requests.erase(it);
  st.latency.forget(id);
  // Published once per request, not per token batch (the histograms hold
  // every token of the request by now).
  st.box->set_latency(st.latency.ttft(), st.latency.itl());
  answer_stop(self);
}

void fail_request(Self self, RequestId id, const std::string& message) {
  auto it = self->state.requests.find(id);
  if (it == self->state.requests.end()) return;
  self->send(it->second.actor, fail_atom::value, message);
  forget(self, id);
}

// Tells the request's node to drop it (blocks freed there) and forgets it.
void drop(Self self, RequestId id) {
  auto& st = self->state;
  auto it = st.requests.find(id);
  if (it == st.requests.end()) return;
  const Pending& p = it->second;
  if (p.wire != 0 && p.node >= 0 && st.nodes[size_t(p.node)].entry) {
    self->send(st.nodes[size_t(p.node)].entry, rcancel_atom::value, p.wire);
  }
  forget(self, id);
}

// Sends a request (all its samples) to the best up node.
void route(Self self, RequestId id) {
  auto& st = self->state;
  Pending& p = st.requests.at(id);
  const std::vector<int32_t>& prompt = p.add.prompt;
  std::vector<std::vector<uint64_t>> hashes(st.nodes.size());
  std::vector<NodeView> views(st.nodes.size());
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    const Slot& n = st.nodes[i];
    hashes[i] = prompt_block_hashes(prompt, n.hello.block_size, prompt.empty() ? 0 : prompt.size() - 1);
    views[i] = NodeView{n.up, n.report.waiting, n.report.running_seqs, n.in_flight, n.report.blocks_free,
                        n.report.blocks_total, &n.cached, hashes[i]};
  }
  const RouteChoice c = choose_node(views, st.config.weights, st.rotation++);
  if (c.node < 0) return fail_request(self, id, std::string(kEngineUnavailable) + ": no engine node is up");
  Slot& n = st.nodes[size_t(c.node)];
  p.node = c.node;
  p.wire = st.next_wire++;
  st.wires[p.wire] = id;
  ++n.in_flight;
  ++n.routed;
  if (c.prefix_blocks > 0) ++n.prefix_routed;
  n.cached.insert(hashes[size_t(c.node)].begin(), hashes[size_t(c.node)].end());
  n.routed_hashes.emplace_back(std::chrono::steady_clock::now(), std::move(hashes[size_t(c.node)]));
  self->send(n.entry, submit_atom::value, WireSubmit{p.wire, prompt, p.add.options, p.add.options.seed.value_or(0)});
}

void schedule_reconnect(Self self, size_t i) {
  self->delayed_send(self, ms(self->state.config.reconnect_interval_s), reconnect_atom::value, uint32_t(i));
}

// A node out of routing: nothing of it is trusted until it answers hello again.
void reset_slot(Self self, size_t i, const std::string& why) {
  Slot& n = self->state.nodes[i];
  self->demonitor(n.entry);
  self->state.box->set_kv(i, n.addr.name(), KvSnapshot{});
  n.entry = nullptr;
  n.up = n.connecting = false;
  ++n.epoch;
  n.report = NodeReport{};
  n.cached.clear();
  n.routed_hashes.clear();
  n.in_flight = n.missed = 0;
  n.error = why;
}

// Out of routing: requests that streamed nothing go elsewhere, the others fail.
void node_down(Self self, size_t i, const std::string& why) {
  auto& st = self->state;
  Slot& n = st.nodes[i];
  if (!n.up) return;
  std::vector<RequestId> lost;
  for (auto& [id, p] : st.requests) {
    if (p.node == int32_t(i) && p.wire != 0) lost.push_back(id);
  }
  for (RequestId id : lost) {
    Pending& p = st.requests.at(id);
    self->send(n.entry, rcancel_atom::value, p.wire);  // a hung node frees them if it wakes
    st.wires.erase(p.wire);
    p.wire = 0;
    p.node = -1;
    if (on_node_lost(p.streamed, p.retries, st.config.max_retries) == LossAction::retry) {
      ++p.retries;
      continue;
    }
    fail_request(self, id,
                 std::string(kEngineUnavailable) + ": engine node " + n.addr.name() + " went down (" + why + ")");
  }
  const size_t retried = size_t(std::count_if(lost.begin(), lost.end(), [&](RequestId id) {
    return st.requests.count(id) != 0;
  }));
  std::cerr << "pagoda: engine node " << n.addr.name() << " is down (" << why << "); " << retried
            << " request(s) sent elsewhere, " << lost.size() - retried << " ended with engine_unavailable\n";
  reset_slot(self, i, why);
  for (RequestId id : lost) {
    if (st.requests.count(id) != 0) route(self, id);
  }
  publish(self);
  schedule_reconnect(self, i);
}

void connect_failed(Self self, size_t i, const std::string& why) {
  Slot& n = self->state.nodes[i];
  n.connecting = false;
  n.tried = true;
  if (why != n.error) std::cerr << "pagoda: engine node " << n.addr.name() << ": " << why << "\n";
  n.error = why;
  publish(self);
  schedule_reconnect(self, i);
}

// Why a node that answered hello cannot join, or empty.
std::string incompatible(Self self, const NodeHello& h) {
  auto& st = self->state;
  if (h.version != kRemoteProtocolVersion) {
    return "refused: protocol version " + std::to_string(h.version) + ", the front end speaks " +
           std::to_string(kRemoteProtocolVersion);
  }
  auto ctx = st.box->context();
  if (ctx && ctx->vocab_size != h.vocab_size) {
    return "refused: vocabulary of " + std::to_string(h.vocab_size) + " tokens, the front end's tokenizer has " +
           std::to_string(ctx->vocab_size);
  }
  const NodeHello* ref = st.reference ? &*st.reference : nullptr;
  if (ref && (ref->model_name != h.model_name || ref->max_model_len != h.max_model_len)) {
    return "refused: serves " + h.model_name + " (context " + std::to_string(h.max_model_len) + "), the others " +
           ref->model_name + " (context " + std::to_string(ref->max_model_len) + ")";
  }
  return {};
}

void on_hello(Self self, size_t i, caf::actor entry, const NodeHello& h) {
  auto& st = self->state;
  if (std::string why = incompatible(self, h); !why.empty()) return connect_failed(self, i, why);
  Slot& n = st.nodes[i];
  n.connecting = false;
  n.tried = true;
  n.up = true;
  n.entry = std::move(entry);
  ++n.epoch;
  n.hello = h;
  n.report = NodeReport{};  // until its first report: empty
  n.report.blocks_total = n.report.blocks_free = h.num_blocks;
  n.missed = 0;
  n.error.clear();
  if (!st.reference) st.reference = h;
  self->monitor(n.entry);
  std::cerr << "pagoda: engine node " << n.addr.name() << " is up (" << h.model_name << ", " << h.num_blocks
            << " KV blocks of " << h.block_size << ")\n";
  publish(self);
}

void connect(Self self, size_t i) {
  Slot& n = self->state.nodes[i];
  if (n.up || n.connecting) return;
  n.connecting = true;
  const auto timeout = ms(self->state.config.connect_timeout_s);
  auto mm = self->system().middleman().actor_handle();
  self->request(mm, timeout, caf::connect_atom::value, n.addr.host, n.addr.port)
      .then(
          [self, i, timeout](const caf::node_id&, const caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            auto entry = caf::actor_cast<caf::actor>(ptr);
            if (!entry) return connect_failed(self, i, "no engine node published on that port");
            self->request(entry, timeout, hello_atom::value, kRemoteProtocolVersion)
                .then([self, i, entry](const NodeHello& h) { on_hello(self, i, entry, h); },
                      [self, i](caf::error& e) { connect_failed(self, i, "hello: " + self->system().render(e)); });
          },
          [self, i](caf::error& e) { connect_failed(self, i, "cannot connect: " + self->system().render(e)); });
}

// One node's pool for the KV map, owners renamed from wire ids to requests.
void poll_kv(Self self, size_t i) {
  Slot& n = self->state.nodes[i];
  const uint64_t epoch = n.epoch;
  self->request(n.entry, ms(self->state.config.report_timeout_s), kv_atom::value)
      .then(
          [self, i, epoch](KvSnapshot& snap) {
            auto& st = self->state;
            if (st.nodes[i].epoch != epoch) return;
            for (SeqOwner& o : snap.owners) {
              auto it = st.wires.find(o.request);
              o.request = it == st.wires.end() ? 0 : it->second;
            }
            st.box->set_kv(i, st.nodes[i].addr.name(), std::move(snap));
          },
          [](caf::error&) {});  // liveness is the report polls' business
}

void poll(Self self) {
  auto& st = self->state;
  const bool kv = st.box->kv_wanted();
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    Slot& n = st.nodes[i];
    if (!n.up) continue;
    const uint64_t epoch = n.epoch;
    if (kv) poll_kv(self, i);
    self->request(n.entry, ms(st.config.report_timeout_s), report_atom::value)
        .then(
            [self, i, epoch](const NodeReport& r) {
              Slot& n = self->state.nodes[i];
              if (n.epoch != epoch) return;
              n.report = r;
              n.missed = 0;
              set_cached(n, r.cached_hashes);
            },
            [self, i, epoch](caf::error& e) {
              Slot& n = self->state.nodes[i];
              if (n.epoch != epoch || ++n.missed < self->state.config.missed_reports_down) return;
              node_down(self, i, "no report in " + std::to_string(n.missed) + " polls: " + self->system().render(e));
            });
  }
  publish(self);
  self->delayed_send(self, std::chrono::milliseconds(st.config.report_interval_ms), poll_atom::value);
}

void on_events(Self self, WireEvents& w) {
  auto& st = self->state;
  auto it = st.wires.find(w.wire);
  if (it == st.wires.end()) return;  // dropped (cancelled, or its node was given up)
  const RequestId id = it->second;
  Pending& p = st.requests.at(id);
  EventBatch b;
  bool done = false;
  const auto now = LatencyTracker::Clock::now();
  for (SeqEvent& e : w.events) {
    p.streamed = p.streamed || e.has_token;
    done = done || e.group_done;
    e.request = id;
    st.latency.observe(e, now);
    b.events.push_back(std::move(e));
  }
  self->send(p.actor, events_atom::value, std::move(b));
  if (done) forget(self, id);
}

void spawn_request(Self self, const SpawnRequest& r) {
  auto& st = self->state;
  auto ctx = st.box->context();
  if (!ctx || st.stopping) {
    r.sink->on_error(st.stopping ? std::string("the engine is shut down")
                                 : std::string(kEngineUnavailable) + ": the front end is not ready");
    return;
  }
  caf::actor a = spawn_request_actor(self->system(), caf::actor_cast<caf::actor>(self), ctx, r.id, r.request, r.sink);
  self->monitor(a);
  st.by_addr[a.address()] = r.id;
  st.requests[r.id].actor = std::move(a);
  st.latency.submitted(r.id, LatencyTracker::Clock::now());
}

void on_down(Self self, const caf::down_msg& dm) {
  auto& st = self->state;
  if (auto it = st.by_addr.find(dm.source); it != st.by_addr.end()) return drop(self, it->second);
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    if (st.nodes[i].entry && st.nodes[i].entry.address() == dm.source) {
      return node_down(self, i, "connection lost: " + self->system().render(dm.reason));
    }
  }
}

caf::result<bool> on_stop(Self self) {
  auto& st = self->state;
  st.stopping = true;
  for (auto& [id, p] : st.requests) self->send<caf::message_priority::high>(p.actor, cancel_atom::value);
  st.stop_waiters.push_back(self->make_response_promise());
  self->delayed_send(self, std::chrono::seconds(10), timeout_atom::value, uint64_t(0));
  answer_stop(self);
  return caf::delegated<bool>{};
}

caf::behavior router_fn(Self self, std::vector<NodeAddress> nodes, RouterConfig config,
                        std::shared_ptr<RouterBox> box) {
  auto& st = self->state;
  st.config = config;
  st.box = std::move(box);
  for (NodeAddress& a : nodes) {
    st.nodes.emplace_back();
    st.nodes.back().addr = std::move(a);
  }
  publish(self);
  for (size_t i = 0; i < st.nodes.size(); ++i) connect(self, i);
  self->send(self, poll_atom::value);
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  return {
      [self](spawn_atom, const SpawnRequest& r) { spawn_request(self, r); },
      [self](add_atom, const AddGroup& g) {
        auto it = self->state.requests.find(g.id);
        if (it == self->state.requests.end()) return;
        it->second.add = g;
        route(self, g.id);
      },
      [self](cancel_atom, RequestId id) { drop(self, id); },
      [](finish_atom, RequestId, int32_t) {},  // the node applies stop strings itself
      [self](abort_atom, RequestId id) {
        auto it = self->state.requests.find(id);
        if (it != self->state.requests.end()) {
          self->send<caf::message_priority::high>(it->second.actor, cancel_atom::value);
        }
      },
      [self](revents_atom, WireEvents& w) { on_events(self, w); },
      [self](rfail_atom, uint64_t wire, const std::string& message) {
        auto it = self->state.wires.find(wire);
        if (it != self->state.wires.end()) fail_request(self, it->second, message);
      },
      [self](poll_atom) { poll(self); },
      [self](reconnect_atom, uint32_t i) { connect(self, size_t(i)); },
      [self](stop_atom) { return on_stop(self); },
      [self](timeout_atom, uint64_t) {
        self->state.requests.clear();  // stop waited long enough
        answer_stop(self);
      },
  };
}

}  // namespace

caf::actor spawn_engine_router(caf::actor_system& sys, std::vector<NodeAddress> nodes, RouterConfig config,
                               std::shared_ptr<RouterBox> box) {
  return sys.spawn(router_fn, std::move(nodes), std::move(config), std::move(box));
}

}  // namespace pagoda::actors
