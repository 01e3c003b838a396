#include "actors/engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "actors/block_manager_actor.hpp"
#include "actors/executor_actor.hpp"
#include "actors/messages.hpp"
#include "actors/request_actor.hpp"
#include "actors/request_intake.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/worker_policy.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "model/model_text.hpp"

namespace pagoda::actors {

void LatencyHistogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++counts[i];
  ++count;
  sum += seconds;
}

LatencyHistogram& LatencyHistogram::operator+=(const LatencyHistogram& o) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += o.counts[i];
  count += o.count;
  sum += o.sum;
  return *this;
}

const char* engine_state_name(EngineState s) {
  switch (s) {
    case EngineState::serving: return "serving";
    case EngineState::recovering: return "recovering";
    case EngineState::failed: return "failed";
    case EngineState::stopping: return "stopping";
  }
  return "unknown";
}

namespace {

// What the owner thread needs until the actor system is destroyed. Shared
// with it: when a hung executor was abandoned, shutdown() returns without
// waiting for it and the owner thread, detached, destroys the system once
// that executor's step returns.
struct Runtime {
  caf::actor_system_config config;  // must outlive the system
  std::unique_ptr<caf::actor_system> system;
  std::shared_ptr<EngineActors> actors = std::make_shared<EngineActors>();
  std::promise<void> stop;
  std::promise<bool> drained;  // every actor but abandoned ones ended; true: some are left
};

}  // namespace

struct Engine::Impl {
  EngineOptions options;
  std::shared_ptr<Runtime> rt = std::make_shared<Runtime>();
  caf::actor scheduler;
  std::shared_ptr<StatsBox> stats = std::make_shared<StatsBox>();
  std::shared_ptr<const RequestContext> context;
  RequestIntake intake;  // submit(): to the scheduler
  int32_t num_blocks = 0, max_model_len = 0;
  // CAF 0.17's ~actor_system hangs while any other live thread than the one
  // running it has constructed the system or spawned an actor (each pins the
  // logger in a thread-local; tested). So one owner thread builds the system,
  // waits for `stop`, then shuts it down and destroys it, and only actors
  // spawn (callers' threads just anon_send, which pins nothing).
  std::thread owner;
  std::mutex actors_mutex;  // guards `scheduler` (null after shutdown) for foreign threads
  std::mutex shutdown_mutex;
};

namespace {

Result<std::shared_ptr<const RequestContext>> make_context(const std::string& path, int32_t vocab,
                                                          std::vector<int32_t> eos_ids) {
  Result<model::ModelText> text = model::load_model_text(path);
  if (!text) return text.error();
  return make_request_context(*text, vocab, std::move(eos_ids));
}

BlockManagerConfig booker_config(const EngineOptions& o, const Executor& ex) {
  BlockManagerConfig bc;
  bc.num_blocks = ex.num_blocks();
  bc.block_size = ex.block_size();
  bc.enable_prefix_caching = o.enable_prefix_caching;
  bc.layout = o.kv_layout;
  bc.max_model_len = ex.max_model_len();  // contiguous: the per-sequence reservation
  // Every layer windowed (Mistral v0.1, Phi-3-mini from HF, ...): blocks
  // outside the window go back to the pool (vLLM's rule). Gemma's global
  // layers read the whole context, so a model with any global layer frees none.
  const model::ModelConfig& mc = ex.config();
  const bool all_windowed = mc.sliding_window > 0 && !mc.sliding_layers.empty() &&
                            std::ranges::all_of(mc.sliding_layers, [](bool w) { return w; });
  if (all_windowed && o.free_out_of_window_blocks) bc.sliding_window = mc.sliding_window;
  return bc;
}

Result<std::unique_ptr<BlockBooker>> make_booker(const EngineOptions& o, const Executor& ex) {
  auto blocks = BlockManager::create(booker_config(o, ex));
  if (!blocks) return blocks.error();
  return std::make_unique<BlockBooker>(std::move(blocks).value());
}

std::shared_ptr<SchedulerCore> make_core(const EngineOptions& o, const Executor& ex) {
  SchedulerConfig sc;
  sc.max_num_seqs = o.max_num_seqs;
  sc.max_num_batched_tokens = o.max_num_batched_tokens;
  sc.max_model_len = ex.max_model_len();
  sc.eos_token_ids = ex.config().eos_token_ids;
  sc.max_in_flight = o.async_scheduling ? 2 : 1;
  sc.book_on_progress = o.book_on_progress;
  // On the CPU a prompt's step is slowed by every decode row beside it (a
  // row costs about what it costs in a decode step); on CUDA a prefill step
  // is compute-bound and the rows beside it cost little, so a step of its
  // own would only delay them (reasoned, not measured on a GPU).
  sc.urgent_prefill_alone = o.urgent_prefill_alone && ex.backend_kind() == gpu::BackendKind::kCpu;
  sc.max_spec_tokens = std::max(o.max_speculative_rows, 0);
  sc.speculative = o.speculative;
  sc.speculative_max_batch = o.speculative_max_batch;
  sc.draft_model = ex.has_draft_model();
  sc.policy = o.scheduling_policy;
  sc.fair = o.fair_share;
  return std::make_shared<SchedulerCore>(sc);
}

// The injectors, counted over every actor the engine ever runs (a
// replacement does not start counting again).
std::function<StepFault(uint64_t)> shared_step_faults(const EngineOptions& o) {
  if (!o.fault_injector) return {};
  auto count = std::make_shared<std::atomic<uint64_t>>(0);
  return [f = o.fault_injector, count](uint64_t) { return f(++*count); };
}

// The supervision's factories: a new executor loads the model again (same
// options, so the same number of blocks); a new block manager starts with a
// fresh pool. On the CPU a replacement gets its own thread pool: the
// process-wide one allows one caller at a time, and a hung executor it
// replaces may come back and use it (gpu/cpu/thread_pool.hpp).
void set_factories(SchedulerActorConfig& sc, const EngineOptions& o, int32_t num_blocks,
                   std::function<StepFault(uint64_t)> faults, BlockManagerActorConfig bm,
                   std::shared_ptr<StatsBox> stats) {
  EngineOptions again = o;
  if (again.cpu_threads == 0) again.cpu_threads = gpu::cpu::ThreadPool::default_thread_count();
  sc.make_executor = [again, num_blocks, faults](caf::actor_system& sys) -> Result<caf::actor> {
    auto ex = Executor::create(again);
    if (!ex) return ex.error();
    if ((*ex)->num_blocks() != num_blocks) {  // the pool's size may not change
      return make_error("the new executor has " + std::to_string((*ex)->num_blocks()) +
                        " KV blocks, the pool " + std::to_string(num_blocks));
    }
    return spawn_executor_actor(sys, std::shared_ptr<Executor>(std::move(ex).value()), faults);
  };
  sc.make_block_manager = [bm, stats](caf::actor_system& sys) -> Result<caf::actor> {
    return spawn_block_manager_actor(sys, bm.fresh_booker(), stats, bm);
  };
}

// The owner thread: builds the system and the actors, and at `stop` drains
// and destroys them.
void run_system(Engine::Impl* impl, std::shared_ptr<Runtime> rt, std::shared_ptr<Executor> ex,
                std::shared_ptr<SchedulerCore> core, std::unique_ptr<BlockBooker> booker,
                std::promise<void>* ready) {
  const EngineOptions& o = impl->options;
  rt->system = std::make_unique<caf::actor_system>(rt->config);
  const BlockManagerConfig bc = booker_config(o, *ex);
  BlockManagerActorConfig bm;
  bm.detached = o.dedicated_engine_threads;
  bm.fault = o.booking_fault_injector;
  bm.fresh_booker = [bc] { return std::make_unique<BlockBooker>(std::move(BlockManager::create(bc)).value()); };
  const auto faults = shared_step_faults(o);
  caf::actor executor = spawn_executor_actor(*rt->system, std::move(ex), faults);
  caf::actor block_manager = spawn_block_manager_actor(*rt->system, std::move(booker), impl->stats, bm);
  SchedulerActorConfig sc;
  sc.step_timeout_s = o.step_timeout_s;
  sc.detached = o.dedicated_engine_threads;
  sc.actors = rt->actors;
  set_factories(sc, o, bc.num_blocks, faults, bm, impl->stats);
  {
    std::lock_guard<std::mutex> lock(impl->actors_mutex);
    impl->scheduler = spawn_scheduler_actor(*rt->system, std::move(core), std::move(block_manager),
                                            std::move(executor), impl->stats, impl->context, sc);
  }
  impl->intake.open(impl->scheduler);
  ready->set_value();
  rt->stop.get_future().wait();
  {
    // Drain first: every request is cancelled (its sink gets on_done with
    // abort) and no step is left in flight (a lost executor's steps end when
    // it is lost, so this never waits for a dead actor).
    caf::scoped_actor self{*rt->system};
    self->request(impl->scheduler, std::chrono::minutes(10), stop_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
  }
  impl->intake.close();
  caf::actor scheduler;
  {
    std::lock_guard<std::mutex> lock(impl->actors_mutex);
    scheduler = std::move(impl->scheduler);
    impl->scheduler = nullptr;
  }
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  scheduler = nullptr;
  {
    std::lock_guard<std::mutex> lock(rt->actors->mu);
    caf::anon_send_exit(rt->actors->block_manager, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(rt->actors->executor, caf::exit_reason::user_shutdown);
    rt->actors->block_manager = nullptr;
    rt->actors->executor = nullptr;
  }
  // Every actor but the abandoned (hung) executors ends now; those end when
  // their step returns, and the system is destroyed then (by this thread,
  // detached from the engine if it has to wait).
  while (rt->system->registry().running() > size_t(std::max(0, rt->actors->abandoned.load()))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  rt->drained.set_value(rt->actors->abandoned.load() > 0);
  rt->system->await_all_actors_done();
  rt->system.reset();
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Engine>> Engine::start(const EngineOptions& options) {
  if (options.max_num_seqs < 1 || options.max_num_batched_tokens < 1) {
    return make_error("engine: max_num_seqs and max_num_batched_tokens must be >= 1");
  }
  if (options.speculative.active()) {
    if (auto ok = options.speculative.config.validate(); !ok) return ok.error();
    if (options.speculative.draft && options.draft_model_path.empty()) {
      return make_error("engine: speculative draft needs a draft model (draft_model_path)");
    }
    if (options.max_speculative_rows < 1) {
      return make_error("engine: speculative decoding needs max_speculative_rows >= 1");
    }
  }
  auto ex = Executor::create(options);  // the ExecutorOptions part
  if (!ex) return ex.error();
  auto ctx = make_context(options.model_path, (*ex)->config().vocab_size, (*ex)->config().eos_token_ids);
  if (!ctx) return ctx.error();
  auto booker = make_booker(options, **ex);
  if (!booker) return booker.error();
  auto core = make_core(options, **ex);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->context = std::move(ctx).value();
  impl->num_blocks = (*ex)->num_blocks();
  impl->max_model_len = (*ex)->max_model_len();
  configure_workers(impl->rt->config, options.actor_threads);
  std::promise<void> ready;
  std::future<void> is_ready = ready.get_future();
  impl->owner = std::thread(run_system, impl.get(), impl->rt,
                            std::shared_ptr<Executor>(std::move(ex).value()), std::move(core),
                            std::move(booker).value(), &ready);
  is_ready.wait();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->shutdown_mutex);
  if (!impl_->owner.joinable()) return;
  std::future<bool> drained = impl_->rt->drained.get_future();
  impl_->rt->stop.set_value();
  if (drained.get()) {
    impl_->owner.detach();  // a hung executor is left: never wait it out
  } else {
    impl_->owner.join();
  }
}

EngineHealth Engine::health() {
  const EngineStats s = impl_->stats->get();
  return EngineHealth{s.state, s.state_detail, s.executor_restarts, s.block_manager_restarts};
}

const EngineOptions& Engine::options() const { return impl_->options; }
int32_t Engine::num_kv_blocks() const { return impl_->num_blocks; }
int32_t Engine::max_model_len() const { return impl_->max_model_len; }

RequestHandle Engine::submit(GenerateRequest request, std::shared_ptr<RequestSink> sink) {
  return impl_->intake.submit(std::move(request), std::move(sink));
}

EngineStats Engine::stats() { return impl_->stats->get(); }

KvSnapshot Engine::kv_snapshot() {
  KvSnapshot snap = impl_->stats->read_snapshot();
  // An idle scheduler runs no steps, so ask it to publish (a no-op when the
  // last snapshot is recent); the next call sees the fresh one.
  std::lock_guard<std::mutex> lock(impl_->rt->actors->mu);
  if (impl_->rt->actors->block_manager) caf::anon_send(impl_->rt->actors->block_manager, snapshot_atom::value);
  return snap;
}

Result<std::vector<int32_t>> Engine::tokenize(const GenerateRequest& request) const {
  return request_prompt_ids(*impl_->context, request);
}

Result<std::string> Engine::detokenize(const std::vector<int32_t>& ids) const {
  return context_detokenize(*impl_->context, ids);
}

std::string Engine::model_name() const {
  std::string path = impl_->options.model_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int32_t Engine::vocab_size() const { return impl_->context->vocab_size; }

std::string Engine::chat_template_source() const {
  return impl_->context->chat_template ? impl_->context->chat_template->source() : std::string();
}

namespace {

// Collects one request's stream for the blocking API. Beam search: the
// samples are the returned beams, best first (text, token_ids, finish;
// logprobs stay empty: per-token logprobs of beams are not tracked).
class CollectSink : public RequestSink {
 public:
  CollectSink(int32_t n, bool beam) : beam_(beam) { result_.samples.resize(beam ? 0 : size_t(n)); }
  bool on_token(const TokenDelta& d) override {
    SampleResult& s = result_.samples[size_t(d.index)];
    s.text += d.text;
    if (d.token_id >= 0) {
      s.token_ids.push_back(d.token_id);
      s.logprobs.push_back(d.logprob);
    }
    return true;
  }
  void on_done(const RequestDone& done) override {
    for (const BeamHypothesis& h : done.beams) {
      if (!beam_) break;
      SampleResult s;
      s.text = h.text;
      s.token_ids = h.token_ids;
      s.finish = h.finish;
      result_.samples.push_back(std::move(s));
    }
    for (size_t i = 0; i < done.finish.size() && i < result_.samples.size(); ++i) {
      result_.samples[i].finish = done.finish[i];
    }
    result_.prompt_tokens = done.prompt_tokens;
    promise_.set_value(std::move(result_));
  }
  void on_error(const std::string& message) override {
    result_.error = message;
    promise_.set_value(std::move(result_));
  }
  std::future<GenerateResult> future() { return promise_.get_future(); }

 private:
  bool beam_ = false;
  GenerateResult result_;
  std::promise<GenerateResult> promise_;
};

}  // namespace

std::vector<GenerateResult> EngineClient::generate(std::vector<GenerateRequest> requests) {
  std::vector<std::future<GenerateResult>> futures;
  for (GenerateRequest& r : requests) {
    auto sink = std::make_shared<CollectSink>(std::max(r.sampling.n, 1), r.sampling.beam_width > 0);
    futures.push_back(sink->future());
    submit(std::move(r), std::move(sink));
  }
  std::vector<GenerateResult> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

std::vector<GenerateResult> EngineClient::generate(const std::vector<std::string>& prompts,
                                                   const SamplingOptions& sampling) {
  std::vector<GenerateRequest> reqs;
  for (const std::string& p : prompts) {
    GenerateRequest r;
    r.prompt = p;
    r.sampling = sampling;
    reqs.push_back(std::move(r));
  }
  return generate(std::move(reqs));
}

}  // namespace pagoda::actors
