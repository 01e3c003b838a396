#include "actors/engine.hpp"

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
#include "model/model_text.hpp"

namespace pagoda::actors {

void LatencyHistogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++counts[i];
  ++count;
  sum += seconds;
}

struct Engine::Impl {
  EngineOptions options;
  caf::actor_system_config config;            // must outlive the system
  std::unique_ptr<caf::actor_system> system;
  caf::actor scheduler, executor, block_manager;
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
  std::promise<void> stop;
  std::mutex actors_mutex;  // guards `block_manager` (null after shutdown) for foreign threads
  std::mutex shutdown_mutex;
};

namespace {

Result<std::shared_ptr<const RequestContext>> make_context(const std::string& path, int32_t vocab) {
  Result<model::ModelText> text = model::load_model_text(path);
  if (!text) return text.error();
  return make_request_context(*text, vocab);
}

Result<std::unique_ptr<BlockBooker>> make_booker(const EngineOptions& o, const Executor& ex) {
  BlockManagerConfig bc;
  bc.num_blocks = ex.num_blocks();
  bc.block_size = ex.block_size();
  bc.enable_prefix_caching = o.enable_prefix_caching;
  bc.layout = o.kv_layout;
  bc.max_model_len = ex.max_model_len();  // contiguous: the per-sequence reservation
  auto blocks = BlockManager::create(bc);
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
  sc.policy = o.scheduling_policy;
  sc.fair = o.fair_share;
  return std::make_shared<SchedulerCore>(sc);
}

// The owner thread: builds the system and the actors, and at `stop` drains
// and destroys them.
void run_system(Engine::Impl* impl, std::shared_ptr<Executor> ex,
                std::shared_ptr<SchedulerCore> core, std::unique_ptr<BlockBooker> booker,
                std::promise<void>* ready) {
  const EngineOptions& o = impl->options;
  impl->system = std::make_unique<caf::actor_system>(impl->config);
  impl->executor = spawn_executor_actor(*impl->system, std::move(ex), o.fault_injector);
  impl->block_manager = spawn_block_manager_actor(*impl->system, std::move(booker), impl->stats,
                                                  o.dedicated_engine_threads);
  SchedulerActorConfig sc;
  sc.step_timeout_s = o.step_timeout_s;
  sc.detached = o.dedicated_engine_threads;
  impl->scheduler = spawn_scheduler_actor(*impl->system, std::move(core), impl->block_manager,
                                          impl->executor, impl->stats, impl->context, sc);
  impl->intake.open(impl->scheduler);
  ready->set_value();
  impl->stop.get_future().wait();
  {
    // Drain first: every request is cancelled (its sink gets on_done with
    // abort) and no step is left in flight, so the executor is idle when it
    // is told to exit.
    caf::scoped_actor self{*impl->system};
    self->request(impl->scheduler, std::chrono::minutes(10), stop_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
  }
  impl->intake.close();
  caf::anon_send_exit(impl->scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(impl->block_manager, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(impl->executor, caf::exit_reason::user_shutdown);
  {
    std::lock_guard<std::mutex> lock(impl->actors_mutex);
    impl->scheduler = nullptr;
    impl->block_manager = nullptr;
    impl->executor = nullptr;
  }
  impl->system->await_all_actors_done();
  impl->system.reset();
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Engine>> Engine::start(const EngineOptions& options) {
  if (options.max_num_seqs < 1 || options.max_num_batched_tokens < 1) {
    return make_error("engine: max_num_seqs and max_num_batched_tokens must be >= 1");
  }
  auto ex = Executor::create(options);  // the ExecutorOptions part
  if (!ex) return ex.error();
  auto ctx = make_context(options.model_path, (*ex)->config().vocab_size);
  if (!ctx) return ctx.error();
  auto booker = make_booker(options, **ex);
  if (!booker) return booker.error();
  auto core = make_core(options, **ex);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->context = std::move(ctx).value();
  impl->num_blocks = (*ex)->num_blocks();
  impl->max_model_len = (*ex)->max_model_len();
  configure_workers(impl->config, options.actor_threads);
  std::promise<void> ready;
  std::future<void> is_ready = ready.get_future();
  impl->owner = std::thread(run_system, impl.get(), std::shared_ptr<Executor>(std::move(ex).value()),
                            std::move(core), std::move(booker).value(), &ready);
  is_ready.wait();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->shutdown_mutex);
  if (!impl_->owner.joinable()) return;
  impl_->stop.set_value();
  impl_->owner.join();
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
  std::lock_guard<std::mutex> lock(impl_->actors_mutex);
  if (impl_->block_manager) caf::anon_send(impl_->block_manager, snapshot_atom::value);
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
