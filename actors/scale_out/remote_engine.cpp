#include "actors/scale_out/remote_engine.hpp"

#include <caf/io/all.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <tuple>

#include "actors/messages.hpp"
#include "actors/scale_out/remote_protocol.hpp"
#include "actors/request_intake.hpp"
#include "actors/worker_policy.hpp"
#include "model/model_text.hpp"

namespace pagoda::actors {

Result<std::vector<NodeAddress>> parse_node_list(const std::string& list) {
  std::vector<NodeAddress> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      return make_error("engine node '" + item + "' is not HOST:PORT");
    }
    const std::string port = item.substr(colon + 1);
    if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) < 1 ||
        std::stoi(port) > 65535) {
      return make_error("engine node '" + item + "': bad port");
    }
    out.push_back(NodeAddress{item.substr(0, colon), uint16_t(std::stoi(port))});
  }
  if (out.empty()) return make_error("no engine node given (HOST:PORT,...)");
  return out;
}

struct RemoteEngine::Impl {
  RemoteEngineOptions options;
  EngineOptions engine_options;  // what options() reports: model path, block size
  NodeHello reference;
  caf::actor_system_config config;  // must outlive the system
  std::unique_ptr<caf::actor_system> system;
  caf::actor router;
  std::shared_ptr<RouterBox> box = std::make_shared<RouterBox>();
  std::shared_ptr<const RequestContext> context;
  RequestIntake intake;  // submit(): to the router
  std::mutex shutdown_mutex;
  std::thread owner;  // builds, runs and destroys the system (see Engine)
  std::promise<void> stop;
};

namespace {

void run_system(RemoteEngine::Impl* impl, std::promise<void>* ready) {
  impl->system = std::make_unique<caf::actor_system>(impl->config);
  impl->router = spawn_engine_router(*impl->system, impl->options.nodes, impl->options.router, impl->box);
  impl->intake.open(impl->router);
  ready->set_value();
  impl->stop.get_future().wait();
  {
    caf::scoped_actor self{*impl->system};
    self->request(impl->router, std::chrono::seconds(15), stop_atom::value).receive([](bool) {}, [](caf::error&) {});
  }
  impl->intake.close();
  caf::anon_send_exit(impl->router, caf::exit_reason::user_shutdown);
  impl->router = nullptr;
  impl->system->await_all_actors_done();
  impl->system.reset();
}

Result<std::shared_ptr<const RequestContext>> load_context(const std::string& path, int32_t vocab) {
  Result<model::ModelText> text = model::load_model_text(path);
  if (!text) return text.error();
  if (text->tokenizer->vocab_size() > vocab) {
    return make_error("the front end's tokenizer (" + path + ") has " + std::to_string(text->tokenizer->vocab_size()) +
                      " tokens, the engine nodes' model " + std::to_string(vocab));
  }
  return make_request_context(*text, vocab);
}

// The first up node, or an error listing why each is down.
Result<NodeHello> first_up(const std::vector<NodeStatus>& nodes) {
  std::string why;
  for (const NodeStatus& n : nodes) {
    if (n.up) return n.hello;
    why += "\n  " + n.name + ": " + (n.error.empty() ? std::string("no answer") : n.error);
  }
  return make_error("no engine node is reachable:" + why);
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

RemoteEngine::RemoteEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<RemoteEngine>> RemoteEngine::start(const RemoteEngineOptions& options) {
  if (options.nodes.empty()) return make_error("no engine node given");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->config.load<caf::io::middleman>();
  add_remote_message_types(impl->config);
  configure_workers(impl->config, options.actor_threads);
  std::promise<void> ready;
  std::future<void> is_ready = ready.get_future();
  impl->owner = std::thread(run_system, impl.get(), &ready);
  is_ready.wait();
  auto engine = std::unique_ptr<RemoteEngine>(new RemoteEngine(std::move(impl)));
  Impl& im = *engine->impl_;
  im.box->wait_tried(std::chrono::milliseconds(int64_t(options.router.connect_timeout_s * 2000) + 1000));
  Result<NodeHello> ref = first_up(im.box->nodes());
  if (!ref) return ref.error();  // ~RemoteEngine stops the system
  const std::string path = options.model_path.empty() ? ref->model_path : options.model_path;
  if (!options.model_path.empty() && base_name(path) != ref->model_name) {
    return make_error("the front end's model " + base_name(path) + " is not the engine nodes' " + ref->model_name);
  }
  auto ctx = load_context(path, ref->vocab_size);
  if (!ctx) return make_error("loading the tokenizer from " + path + ": " + ctx.error().message);
  im.context = *ctx;
  im.box->set_context(*ctx);
  im.reference = *ref;
  im.engine_options.model_path = path;
  im.engine_options.block_size = ref->block_size;
  im.engine_options.max_num_seqs = ref->max_num_seqs;
  im.engine_options.max_model_len = ref->max_model_len;
  return engine;
}

RemoteEngine::~RemoteEngine() { shutdown(); }

void RemoteEngine::shutdown() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->shutdown_mutex);
  if (!impl_->owner.joinable()) return;
  impl_->stop.set_value();
  impl_->owner.join();
}

RequestHandle RemoteEngine::submit(GenerateRequest request, std::shared_ptr<RequestSink> sink) {
  return impl_->intake.submit(std::move(request), std::move(sink));
}

EngineStats RemoteEngine::stats() {
  EngineStats s;
  for (const NodeStatus& n : impl_->box->nodes()) {
    if (!n.up) continue;
    const NodeReport& r = n.report;
    s.running += r.running;
    s.waiting += r.waiting;
    s.running_seqs += r.running_seqs;
    s.kv_blocks_total += r.blocks_total;
    s.kv_blocks_used += r.blocks_used;
    s.kv_blocks_free += r.blocks_free;
    s.kv_blocks_cached += r.blocks_cached;
    s.prefix_queried_tokens += r.prefix_queried_tokens;
    s.prefix_hit_tokens += r.prefix_hit_tokens;
    s.prompt_tokens += r.prompt_tokens;
    s.generation_tokens += r.generation_tokens;
    s.tokens_generated += r.generation_tokens;
    s.steps += r.steps;
    s.preemptions += r.preemptions;
    s.urgent_prefill_steps += r.urgent_prefill_steps;
    s.spec += r.spec;
    s.queue += r.queue;
  }
  std::tie(s.ttft, s.itl) = impl_->box->latency();  // measured at the front end
  return s;
}

namespace {

// Appends one node's pool: block ids shifted past the pools before it, seq
// ids tagged with the node's position (so they stay unique and ascending).
void append_pool(KvSnapshot& out, size_t node, const std::string& name, const KvSnapshot& s) {
  const int32_t base = out.pool.total_blocks;
  const uint64_t tag = uint64_t(node + 1) << 48;
  out.pools.push_back(KvPoolRange{name, base, s.pool.total_blocks, s.pool.used_blocks, s.pool.free_blocks,
                                  s.pool.cached_blocks});
  PoolSnapshot& p = out.pool;
  p.total_blocks += s.pool.total_blocks;
  p.used_blocks += s.pool.used_blocks;
  p.free_blocks += s.pool.free_blocks;
  p.cached_blocks += s.pool.cached_blocks;
  p.watermark_blocks += s.pool.watermark_blocks;
  p.stats.queried_tokens += s.pool.stats.queried_tokens;
  p.stats.hit_tokens += s.pool.stats.hit_tokens;
  p.stats.evicted_blocks += s.pool.stats.evicted_blocks;
  for (BlockSnapshot b : s.pool.blocks) {
    for (SeqId& q : b.seqs) q |= tag;
    p.blocks.push_back(std::move(b));
  }
  for (SeqSnapshot q : s.pool.seqs) {
    q.seq |= tag;
    for (BlockId& b : q.table) b += base;
    p.seqs.push_back(std::move(q));
  }
  for (SeqOwner o : s.owners) {
    o.seq |= tag;
    out.owners.push_back(o);
  }
}

}  // namespace

KvSnapshot RemoteEngine::kv_snapshot() {
  KvSnapshot out;
  out.pool.block_size = impl_->reference.block_size;
  const auto pools = impl_->box->kv();
  for (size_t i = 0; i < pools.size(); ++i) {
    if (pools[i].second.pool.total_blocks > 0) append_pool(out, i, pools[i].first, pools[i].second);
  }
  return out;
}

Result<std::vector<int32_t>> RemoteEngine::tokenize(const GenerateRequest& request) const {
  return request_prompt_ids(*impl_->context, request);
}

Result<std::string> RemoteEngine::detokenize(const std::vector<int32_t>& ids) const {
  return context_detokenize(*impl_->context, ids);
}

std::string RemoteEngine::model_name() const { return impl_->reference.model_name; }
int32_t RemoteEngine::vocab_size() const { return impl_->context->vocab_size; }

std::string RemoteEngine::chat_template_source() const {
  return impl_->context->chat_template ? impl_->context->chat_template->source() : std::string();
}
const EngineOptions& RemoteEngine::options() const { return impl_->engine_options; }
int32_t RemoteEngine::max_model_len() const { return impl_->reference.max_model_len; }

int32_t RemoteEngine::num_kv_blocks() const {
  int32_t total = 0;
  for (const NodeStatus& n : impl_->box->nodes()) total += n.up ? n.hello.num_blocks : 0;
  return total;
}

std::vector<NodeStatus> RemoteEngine::nodes() const { return impl_->box->nodes(); }

std::vector<EngineNodeInfo> RemoteEngine::engine_nodes() const {
  std::vector<EngineNodeInfo> out;
  for (const NodeStatus& n : impl_->box->nodes()) {
    const NodeReport& r = n.report;
    out.push_back(EngineNodeInfo{n.name, n.up, r.waiting, r.running_seqs, r.blocks_total, r.blocks_used,
                                 r.prefix_hit_tokens, n.routed, n.prefix_routed});
  }
  return out;
}

}  // namespace pagoda::actors
