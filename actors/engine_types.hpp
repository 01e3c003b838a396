// The engine's public vocabulary: what a caller hands an engine and gets
// back (EngineOptions, GenerateRequest, TokenDelta, RequestDone, RequestSink,
// EngineStats, EngineHealth, ...). It sits at the bottom of actors/: every
// actor header may include it; none includes the facade above them
// (actors/engine.hpp) or the client interface (actors/engine_client.hpp).
// Plain data and interfaces: no actors, no threads; the contracts of the
// callbacks (which thread runs them) are the Engine's (engine.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/block_manager.hpp"
#include "actors/executor.hpp"
#include "actors/fair_share.hpp"
#include "actors/sampling_options.hpp"
#include "actors/scheduling_policy.hpp"
#include "actors/sequence.hpp"
#include "gpu/backend.hpp"
#include "gpu/result.hpp"
#include "model/llama_weights.hpp"

namespace pagoda::actors {

// What a fault injector asks of the executor for one plan: fail it (as a
// device error would) and/or wait first (a hung step), throw inside the
// step (after the executor took the plan's deltas), or end the executor
// actor without an answer (a crash: the scheduler restarts it).
struct StepFault {
  bool fail = false;
  double delay_s = 0.0;
  bool throw_in_step = false;
  bool die = false;
};

// The engine's state as /health reports it: serving; recovering (an actor
// died or hung and is being replaced); failed (a replacement failed: every
// request ends with an error); stopping (shutdown began).
enum class EngineState { serving, recovering, failed, stopping };
const char* engine_state_name(EngineState s);

// The executor's options (model, backend, precision, KV budget, step limits,
// CPU threads) plus the scheduler's and the actor system's.
struct EngineOptions : ExecutorOptions {
  // Speculative decoding for requests that do not choose (--speculative),
  // and the largest batch (running sequences) in which a step drafts.
  SpeculativeOptions speculative;
  int32_t speculative_max_batch = 1;
  bool enable_prefix_caching = true;
  // A model whose every layer attends through a sliding window: give its
  // sequences' blocks outside the window back to the pool (block_booking.hpp).
  // Off only to compare against (tests).
  bool free_out_of_window_blocks = true;
  // paged (default) or contiguous: the baseline where every admitted sequence
  // reserves ceil(max_model_len / block_size) blocks up front (no sharing, no
  // prefix caching). Set max_model_len to what a contiguous server would
  // reserve per sequence.
  KvLayout kv_layout = KvLayout::paged;
  size_t actor_threads = 2;   // CAF cooperative workers (request actors)
  // Schedule one step ahead of execution (placeholders for the ids of the
  // step in flight); false = lockstep. Outputs are identical either way.
  bool async_scheduling = true;
  // One step ahead: book the next step when the executor reports that the
  // step in flight has only its sampling left (SchedulerConfig::
  // book_on_progress); false: as soon as a step is sent.
  bool book_on_progress = true;
  // The scheduler and block-manager actors get a thread each (detached), so
  // request actors (detokenizing, stop strings, sinks) never delay a step.
  bool dedicated_engine_threads = true;
  // A step the executor has not answered after this many seconds ends its
  // groups with an error (0: wait forever).
  double step_timeout_s = 300.0;
  // Admission order (actors/scheduling_policy.hpp) and the fair policy's
  // token weights and client shares (actors/fair_share.hpp).
  SchedulingPolicy scheduling_policy = SchedulingPolicy::fair;
  FairShareConfig fair_share;
  // fair, CPU backend: a client's single waiting request runs its prompt in a
  // step of its own while another client has a queue
  // (SchedulerConfig::urgent_prefill_alone; ignored on CUDA, see engine.cpp).
  bool urgent_prefill_alone = true;
  // Tests: consulted by the executor actor before each plan it runs (nth
  // counts over every executor the engine ever ran).
  std::function<StepFault(uint64_t nth_plan)> fault_injector;
  // Tests: true ends the block-manager actor on that booking (an exception
  // in its handler, as a crash would; the scheduler restarts it).
  std::function<bool(uint64_t nth_booking)> booking_fault_injector;
};

// One chat message as the chat template sees it. tool_calls_json: empty, or
// a JSON array of {id, type, function: {name, arguments}} (arguments an
// object when the client's string parsed as one) given to the template as
// the message's "tool_calls"; tool_call_id and name: set when non-empty.
struct ChatMessage {
  std::string role, content;
  std::string tool_calls_json = {};  // (default initializers: {role, content} stays a complete aggregate init)
  std::string tool_call_id = {};
  std::string name = {};
};

// One request: prompt_ids when non-empty, else messages (chat template) when
// non-empty, else prompt (tokenized with the model's BOS rule). tools_json:
// empty, or a JSON array of tool schemas the chat template sees as `tools`.
struct GenerateRequest {
  std::string prompt;
  std::vector<ChatMessage> messages;
  std::string tools_json;
  std::vector<int32_t> prompt_ids;
  SamplingOptions sampling;
};

struct TokenDelta {
  int32_t index = 0;         // sample index (0..n-1)
  std::string text;          // new final text (may be empty: held back for UTF-8 / stop strings)
  int32_t token_id = -1;
  float logprob = 0.0f;
  std::vector<int32_t> top_tokens;
  std::vector<float> top_logprobs;
};

// One beam-search hypothesis: its generated tokens (prompt excluded), their
// text, sum of token logprobs, and the ranking score as transformers computes
// it: cumulative_logprob / L^length_penalty, L = generated tokens including a
// final EOS.
struct BeamHypothesis {
  std::string text;
  std::vector<int32_t> token_ids;
  double cumulative_logprob = 0.0;
  double score = 0.0;
  FinishReason finish = FinishReason::none;  // none while the beam is live
};

// Beam search progress: the current beams, best first (live and finished).
struct BeamsUpdate {
  std::vector<BeamHypothesis> beams;
};

struct RequestDone {
  // Per sample; for beam search per returned beam (beams.size() entries).
  std::vector<FinishReason> finish;
  // Beam search only: the n best hypotheses, best first; empty otherwise.
  std::vector<BeamHypothesis> beams;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;     // over all samples
  // Speculative decoding: tokens drafted for the request and of those kept.
  int64_t spec_drafted = 0, spec_accepted = 0;
};

// The consumer of one request's stream (the network layer, or generate()).
// on_token returning false means the consumer is gone: the request is
// cancelled. Exactly one of on_done / on_error ends the stream (none when the
// consumer refused a token).
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual bool on_token(const TokenDelta& delta) = 0;
  virtual void on_done(const RequestDone& done) = 0;
  virtual void on_error(const std::string& message) = 0;
  // Beam search only, after each step: the ranked beams so far. Beam search
  // streams no on_token calls; its result comes in RequestDone::beams.
  virtual void on_beams(const BeamsUpdate& /*update*/) {}
};

// A latency histogram with fixed Prometheus-style bounds (seconds).
// counts[i] holds the observations in (kBounds[i-1], kBounds[i]] (NOT
// cumulative); counts[kBounds.size()] is the +Inf bucket.
struct LatencyHistogram {
  static constexpr std::array<double, 16> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                     0.5,   1.0,    2.5,   5.0,  10.0,  20.0, 30.0, 60.0};
  uint64_t count = 0;
  double sum = 0.0;  // seconds
  std::array<uint64_t, kBounds.size() + 1> counts{};
  void observe(double seconds);
  LatencyHistogram& operator+=(const LatencyHistogram& o);
};

// Where the latencies are measured: in the scheduler actor. TTFT = from the
// scheduler receiving the request (Engine::submit sends it at once) to the
// step that produced the request's first token (any sample); ITL = between
// consecutive tokens of one sample (n samples: n streams). Measured when the
// step's result is applied, before the request actor detokenizes. Queue
// time = from the scheduler receiving the request to its sending the plan
// of the step that first admits it (that step then waits for the step in
// flight, if any: one step ahead); with remote nodes, the nodes' sum.
struct EngineStats {
  int32_t running = 0, waiting = 0;  // groups
  int32_t running_seqs = 0, peak_running_seqs = 0;  // sequences; peak over all steps
  int32_t peak_kv_blocks_used = 0;                   // over all steps
  uint64_t preemptions = 0, tokens_generated = 0, steps = 0;
  uint64_t urgent_prefill_steps = 0;  // fair: steps that ran urgent prompts alone
  int32_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_free = 0, kv_blocks_cached = 0;
  // The draft model's own KV pool (0 without one), as of the last step.
  int32_t draft_kv_blocks_total = 0, draft_kv_blocks_used = 0;
  uint64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;
  uint64_t prompt_tokens = 0;      // prompt lengths of groups accepted (once per group)
  uint64_t generation_tokens = 0;  // tokens sampled, all samples (= tokens_generated)
  // Speculative decoding: tokens drafted and of those accepted (all
  // requests), by proposer.
  SpecStats spec;
  LatencyHistogram ttft, itl, queue;
  // KV utilisation = tokens stored / (blocks held x block_size), sampled after
  // each step that holds blocks: the last sample and the mean of all samples.
  double kv_utilisation = 0.0, kv_utilisation_mean = 0.0;
  uint64_t kv_utilisation_samples = 0;
  // Per executed step (sums over timed_steps): wall = from the end of the
  // previous step to the end of this one, compute = the executor's forward +
  // sampling, host = wall - compute (the host work on the critical path
  // between two steps: executor bookkeeping and any wait for the next plan).
  uint64_t timed_steps = 0;
  double step_wall_s = 0.0, step_compute_s = 0.0, step_host_s = 0.0;
  // The executor's host preparation of the steps that ran (sums): on the
  // critical path (before each forward was issued), and the part done while
  // the step before ran (ExecutorOptions::prepare_ahead), with the number of
  // steps so prepared.
  uint64_t steps_prepared_ahead = 0;
  double step_prep_s = 0.0, step_ahead_prep_s = 0.0;
  uint64_t failed_steps = 0, timed_out_steps = 0;
  // Supervision: the state, and how often each actor was replaced (died,
  // or hung past step_timeout_s) since the start.
  EngineState state = EngineState::serving;
  uint64_t executor_restarts = 0, block_manager_restarts = 0;
  std::string state_detail;  // why the engine last recovered or failed
};

// A submitted request. cancel() is idempotent and safe after the end.
class RequestHandle {
 public:
  RequestHandle() = default;
  void cancel();
  uint64_t id() const { return id_; }

 private:
  friend class RequestIntake;  // actors/request_intake.hpp: Engine's and RemoteEngine's
  std::shared_ptr<void> scheduler_;  // a weak caf::actor_addr, type-erased
  uint64_t id_ = 0;
};

// The offline API's answer for one prompt.
struct SampleResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  FinishReason finish = FinishReason::none;
};
struct GenerateResult {
  std::vector<SampleResult> samples;  // [n]
  int32_t prompt_tokens = 0;
  std::string error;                  // non-empty when the request failed
};

// What /health reports of an engine (see EngineState).
struct EngineHealth {
  EngineState state = EngineState::serving;
  std::string detail;  // why it last recovered or failed; empty if never
  uint64_t executor_restarts = 0, block_manager_restarts = 0;
};

// Scale-out: one engine node as the front end sees it (RemoteEngine).
struct EngineNodeInfo {
  std::string name;  // HOST:PORT
  bool up = false;
  int32_t waiting = 0, running_seqs = 0, kv_blocks_total = 0, kv_blocks_used = 0;
  uint64_t prefix_hit_tokens = 0;
  uint64_t routed = 0, prefix_routed = 0;  // requests this front end sent there / with a cached prefix
};

}  // namespace pagoda::actors
