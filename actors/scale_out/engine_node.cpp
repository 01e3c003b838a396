#include "actors/scale_out/engine_node.hpp"

#include <caf/io/all.hpp>

#include <condition_variable>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "actors/messages.hpp"
#include "actors/scale_out/remote_protocol.hpp"
#include "actors/scale_out/route_policy.hpp"
#include "actors/worker_policy.hpp"

namespace pagoda::actors {
namespace {

// (rdone_atom, front addr, wire, tokens) from a NodeSink to the entry: the
// request ended; `tokens` (prompt + sample 0's output) become cached hashes.
using rdone_atom = caf::atom_constant<caf::atom("rdone")>;

// What the sinks (engine threads) share with EngineNode::stop: sends go out
// only while the node's system lives; stop() closes the gate, then waits for
// every sink (each holds handles into that system) to be destroyed.
struct SinkGate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = true;
  int32_t live = 0;
  template <class... Ts>
  void send(const caf::actor& to, Ts&&... xs) {
    std::lock_guard<std::mutex> lock(mu);
    if (open) caf::anon_send(to, std::forward<Ts>(xs)...);
  }
};

// Streams one request's engine output to its front end as token ids.
class NodeSink : public RequestSink {
 public:
  NodeSink(std::shared_ptr<SinkGate> gate, caf::actor front, caf::actor entry, uint64_t wire,
           std::vector<int32_t> prompt)
      : gate_(std::move(gate)), front_(std::move(front)), entry_(std::move(entry)), wire_(wire),
        tokens_(std::move(prompt)) {
    std::lock_guard<std::mutex> lock(gate_->mu);
    ++gate_->live;
  }
  ~NodeSink() override {
    front_ = entry_ = nullptr;  // released before the node's system may go
    std::lock_guard<std::mutex> lock(gate_->mu);
    --gate_->live;
    gate_->cv.notify_all();
  }

  bool on_token(const TokenDelta& d) override {
    if (d.token_id < 0) return true;  // a text flush: the front end decodes itself
    if (d.index == 0) tokens_.push_back(d.token_id);
    SeqEvent e;
    e.index = d.index;
    e.has_token = true;
    e.sample.token = d.token_id;
    e.sample.logprob = d.logprob;
    e.sample.top_tokens = d.top_tokens;
    e.sample.top_logprobs = d.top_logprobs;
    send({std::move(e)});
    return true;
  }
  void on_beams(const BeamsUpdate& u) override {
    SeqEvent e;
    e.has_token = true;
    e.beam = true;
    e.beams = to_results(u.beams);
    send({std::move(e)});
  }
  void on_done(const RequestDone& done) override {
    std::vector<SeqEvent> events;
    if (!done.beams.empty()) {
      SeqEvent e;
      e.beam = e.beam_final = true;
      e.beams = to_results(done.beams);
      events.push_back(std::move(e));
    }
    for (size_t i = 0; done.beams.empty() && i < done.finish.size(); ++i) {
      SeqEvent e;
      e.index = int32_t(i);
      e.finish = done.finish[i];
      events.push_back(std::move(e));
    }
    SeqEvent last;
    last.index = -1;
    last.group_done = true;
    events.push_back(std::move(last));
    send(std::move(events));
    ended();
  }
  void on_error(const std::string& message) override {
    gate_->send(front_, rfail_atom::value, wire_, message);
    ended();
  }

 private:
  static std::vector<BeamResult> to_results(const std::vector<BeamHypothesis>& beams) {
    std::vector<BeamResult> out;
    for (const BeamHypothesis& h : beams) {
      out.push_back(BeamResult{h.token_ids, h.cumulative_logprob, h.score, h.finish});
    }
    return out;
  }
  void send(std::vector<SeqEvent> events) {
    for (SeqEvent& e : events) e.request = wire_;
    gate_->send(front_, revents_atom::value, WireEvents{wire_, std::move(events)});
  }
  void ended() { gate_->send(entry_, rdone_atom::value, front_.address(), wire_, std::move(tokens_)); }

  std::shared_ptr<SinkGate> gate_;
  caf::actor front_, entry_;
  uint64_t wire_;
  std::vector<int32_t> tokens_;
};

struct EntryState {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<SinkGate> gate;
  EngineNodeOptions options;
  std::unique_ptr<HashLru> lru;
  std::map<caf::actor_addr, std::map<uint64_t, RequestHandle>> by_front;
};
using Self = caf::stateful_actor<EntryState>*;

void learn(Self self, const std::vector<int32_t>& tokens) {
  auto& st = self->state;
  const int32_t bs = int32_t(st.engine->options().block_size);
  for (uint64_t h : prompt_block_hashes(tokens, bs, tokens.size())) st.lru->touch(h);
}

// The front end that sent the current message, monitored once.
caf::actor front_of(Self self) {
  auto front = caf::actor_cast<caf::actor>(self->current_sender());
  if (front && self->state.by_front.emplace(front.address(), std::map<uint64_t, RequestHandle>{}).second) {
    self->monitor(front);
  }
  return front;
}

void submit(Self self, const WireSubmit& w) {
  auto& st = self->state;
  caf::actor front = front_of(self);
  if (!front) return;
  GenerateRequest req;
  req.prompt_ids = w.prompt;
  req.sampling = w.options;
  req.sampling.seed = w.seed;
  // Prefix caching may reuse at most prompt_len - 1 tokens (BlockManager).
  for (uint64_t h : prompt_block_hashes(w.prompt, int32_t(st.engine->options().block_size),
                                        w.prompt.empty() ? 0 : w.prompt.size() - 1)) {
    st.lru->touch(h);
  }
  auto sink = std::make_shared<NodeSink>(st.gate, front, caf::actor_cast<caf::actor>(self), w.wire, w.prompt);
  st.by_front[front.address()][w.wire] = st.engine->submit(std::move(req), std::move(sink));
}

NodeReport make_report(Self self) {
  auto& st = self->state;
  const EngineStats s = st.engine->stats();
  NodeReport r;
  r.running = s.running;
  r.waiting = s.waiting;
  r.running_seqs = s.running_seqs;
  r.blocks_total = s.kv_blocks_total;
  r.blocks_used = s.kv_blocks_used;
  r.blocks_free = s.kv_blocks_free;
  r.blocks_cached = s.kv_blocks_cached;
  if (r.blocks_total == 0) {  // nothing booked yet: the pool is all free
    r.blocks_total = r.blocks_free = st.engine->num_kv_blocks();
  }
  r.prefix_queried_tokens = s.prefix_queried_tokens;
  r.prefix_hit_tokens = s.prefix_hit_tokens;
  r.prompt_tokens = s.prompt_tokens;
  r.generation_tokens = s.generation_tokens;
  r.steps = s.steps;
  r.preemptions = s.preemptions;
  r.urgent_prefill_steps = s.urgent_prefill_steps;
  r.spec = s.spec;
  r.queue = s.queue;
  r.cached_hashes = st.lru->recent(st.options.max_reported_hashes);
  return r;
}

// The engine's block pool with the sender's requests named by their wire
// ids (everyone else's by 0).
KvSnapshot kv_for_sender(Self self) {
  KvSnapshot snap = self->state.engine->kv_snapshot();
  std::unordered_map<uint64_t, uint64_t> wire_of;  // engine request id -> wire
  auto it = self->state.by_front.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
  if (it != self->state.by_front.end()) {
    for (const auto& [wire, handle] : it->second) wire_of[handle.id()] = wire;
  }
  for (SeqOwner& o : snap.owners) {
    auto w = wire_of.find(o.request);
    o.request = w == wire_of.end() ? 0 : w->second;
  }
  return snap;
}

NodeHello make_hello(Self self) {
  const Engine& e = *self->state.engine;
  NodeHello h;
  h.version = kRemoteProtocolVersion;
  h.model_name = e.model_name();
  h.model_path = e.options().model_path;
  h.vocab_size = e.vocab_size();
  h.block_size = int32_t(e.options().block_size);
  h.num_blocks = e.num_kv_blocks();
  h.max_model_len = e.max_model_len();
  h.max_num_seqs = int32_t(e.options().max_num_seqs);
  return h;
}

void cancel_all(Self self) {
  for (auto& [front, requests] : self->state.by_front) {
    for (auto& [wire, handle] : requests) handle.cancel();
  }
  self->state.by_front.clear();
}

caf::behavior entry_fn(Self self, std::shared_ptr<Engine> engine, std::shared_ptr<SinkGate> gate,
                       EngineNodeOptions options) {
  auto& st = self->state;
  st.engine = std::move(engine);
  st.gate = std::move(gate);
  st.options = options;
  st.lru = std::make_unique<HashLru>(size_t(std::max(st.engine->num_kv_blocks(), 1)));
  self->set_down_handler([self](caf::down_msg& dm) {
    auto it = self->state.by_front.find(dm.source);
    if (it == self->state.by_front.end()) return;
    std::cerr << "pagoda engine: a front end went away (" << self->system().render(dm.reason) << "); cancelling its "
              << it->second.size() << " request(s)\n";
    for (auto& [wire, handle] : it->second) handle.cancel();
    self->state.by_front.erase(it);
  });
  return {
      [self](hello_atom, uint32_t version) -> caf::result<NodeHello> {
        if (version != kRemoteProtocolVersion) {
          return caf::make_error(caf::sec::runtime_error,
                                 "protocol version mismatch: the front end speaks " + std::to_string(version) +
                                     ", this engine node speaks " + std::to_string(kRemoteProtocolVersion));
        }
        front_of(self);
        return make_hello(self);
      },
      [self](report_atom) { return make_report(self); },
      [self](kv_atom) { return kv_for_sender(self); },
      [self](stop_atom) {
        cancel_all(self);
        return true;
      },
      [self](submit_atom, const WireSubmit& w) { submit(self, w); },
      [self](rcancel_atom, uint64_t wire) {
        auto it = self->state.by_front.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
        if (it == self->state.by_front.end()) return;
        if (auto r = it->second.find(wire); r != it->second.end()) {
          r->second.cancel();
          it->second.erase(r);
        }
      },
      [self](rdone_atom, const caf::actor_addr& front, uint64_t wire, const std::vector<int32_t>& tokens) {
        if (auto it = self->state.by_front.find(front); it != self->state.by_front.end()) it->second.erase(wire);
        learn(self, tokens);
      },
  };
}

}  // namespace

struct EngineNode::Impl {
  std::shared_ptr<SinkGate> gate = std::make_shared<SinkGate>();
  caf::actor_system_config config;  // must outlive the system
  std::unique_ptr<caf::actor_system> system;
  caf::actor entry;
  uint16_t port = 0;
  // As in Engine: one owner thread builds, runs and destroys the system.
  std::thread owner;
  std::promise<void> stop;
  std::mutex stop_mutex;
};

namespace {

// No sink sends any more; the node's requests are cancelled on the engine
// and every sink is gone (bounded: a stuck engine step is left behind).
void close_gate(EngineNode::Impl& impl) {
  {
    std::lock_guard<std::mutex> lock(impl.gate->mu);
    impl.gate->open = false;
  }
  caf::scoped_actor self{*impl.system};
  self->request(impl.entry, std::chrono::seconds(5), stop_atom::value).receive([](bool) {}, [](caf::error&) {});
  std::unique_lock<std::mutex> lock(impl.gate->mu);
  if (!impl.gate->cv.wait_for(lock, std::chrono::seconds(10), [&] { return impl.gate->live == 0; })) {
    std::cerr << "pagoda engine: " << impl.gate->live << " request(s) did not end within 10 s of the node stopping\n";
  }
}

void run_node(EngineNode::Impl* impl, std::shared_ptr<Engine> engine, EngineNodeOptions options,
              std::promise<Result<uint16_t>>* ready) {
  impl->system = std::make_unique<caf::actor_system>(impl->config);
  impl->entry = impl->system->spawn(entry_fn, std::move(engine), impl->gate, options);
  auto port = impl->system->middleman().publish(impl->entry, options.port, options.host.c_str(), true);
  if (port) {
    ready->set_value(*port);
    impl->stop.get_future().wait();
  } else {
    ready->set_value(make_error("engine node: cannot listen on " + options.host + ":" +
                                std::to_string(options.port) + ": " + impl->system->render(port.error())));
  }
  close_gate(*impl);
  caf::anon_send_exit(impl->entry, caf::exit_reason::user_shutdown);
  impl->entry = nullptr;
  impl->system->await_all_actors_done();
  impl->system.reset();
}

}  // namespace

EngineNode::EngineNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<EngineNode>> EngineNode::start(std::shared_ptr<Engine> engine,
                                                      const EngineNodeOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->config.load<caf::io::middleman>();
  add_remote_message_types(impl->config);
  configure_workers(impl->config, 2);
  impl->config.set("logger.verbosity", caf::atom("quiet"));
  std::promise<Result<uint16_t>> ready;
  auto is_ready = ready.get_future();
  impl->owner = std::thread(run_node, impl.get(), std::move(engine), options, &ready);
  Result<uint16_t> port = is_ready.get();
  if (!port) {
    impl->owner.join();
    return port.error();
  }
  impl->port = *port;
  return std::unique_ptr<EngineNode>(new EngineNode(std::move(impl)));
}

EngineNode::~EngineNode() { stop(); }

void EngineNode::stop() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->stop_mutex);
  if (!impl_->owner.joinable()) return;
  impl_->stop.set_value();
  impl_->owner.join();
}

uint16_t EngineNode::port() const { return impl_->port; }

}  // namespace pagoda::actors
