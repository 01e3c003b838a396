// Engine: the inference engine behind the server and the offline API. It owns
// a CAF actor_system with three kinds of actors:
//   executor actor  (detached: the only one that blocks) runs StepPlans on the
//                   model (actors/executor.hpp);
//   scheduler actor owns the SchedulerCore (continuous batching, paged KV
//                   blocks, preemption) and sends one plan per step;
//   request actors  one per request: tokenize (chat template for chat
//                   requests), submit a group, detokenize incrementally, apply
//                   stop strings and stream to a RequestSink.
// The scheduler monitors request actors: a request that ends for any reason
// (finish, cancel, a sink that refuses tokens) releases every block of its
// group. It also supervises the executor and the block-manager actor (see
// actors/scheduler_actor.hpp): one that dies, or an executor that hangs past
// step_timeout_s, is replaced; the requests in flight end with an error and
// the others go on. ~Engine stops every actor and waits for them, except an
// abandoned hung executor (its thread ends the actor system when its step
// returns; shutdown does not wait for it).
//
// Thread-safety: submit(), generate(), stats() and RequestHandle::cancel()
// may be called from any thread, concurrently; ~Engine from any thread too
// (an internal owner thread builds and destroys the actor system: CAF 0.17's
// ~actor_system hangs on any other thread than the constructing one).
// stats() reads a snapshot the scheduler publishes; it never blocks on actors. RequestSink callbacks run on
// an actor thread, one at a time per request.
#pragma once


#include <memory>

#include "actors/engine_client.hpp"
#include "actors/engine_types.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

class Engine : public EngineClient {
 public:
  // Loads the model and starts the actors. Errors: a bad model or option.
  static Result<std::unique_ptr<Engine>> start(const EngineOptions& options);
  ~Engine() override;  // = shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Cancels every request (each sink gets on_done with FinishReason::abort,
  // from an actor thread, before this returns), stops the actors and waits
  // for them. Idempotent; later submit() calls fail with on_error. Call it
  // from any thread but never from a RequestSink callback.
  void shutdown() override;

  // Starts one request; the sink receives its stream. Invalid sampling
  // options are reported through sink->on_error.
  RequestHandle submit(GenerateRequest request, std::shared_ptr<RequestSink> sink) override;
  EngineStats stats() override;
  // From the scheduler's published state: serving, recovering (an actor is
  // being replaced), failed, stopping; and the restart counts.
  EngineHealth health() override;
  // The latest block-pool snapshot the scheduler published (it publishes at
  // most every snapshot_interval while someone has asked within the last few
  // seconds; the first call may return an empty snapshot with total_blocks 0
  // only before the scheduler has run). Never blocks on actors.
  KvSnapshot kv_snapshot() override;

  // The prompt ids a request would run with (the request actor's rules:
  // prompt_ids, else chat messages through the chat template, else prompt
  // text with the tokenizer's BOS rule). Thread-safe, no actors involved.
  Result<std::vector<int32_t>> tokenize(const GenerateRequest& request) const override;
  // Plain text of ids (special tokens included). Errors: an id outside the
  // vocabulary.
  Result<std::string> detokenize(const std::vector<int32_t>& ids) const override;
  // The model's name as the API reports it (the file or directory name).
  std::string model_name() const override;
  int32_t vocab_size() const override;
  std::string chat_template_source() const override;

  const EngineOptions& options() const override;
  int32_t num_kv_blocks() const override;
  int32_t max_model_len() const override;

  struct Impl;  // opaque: the actor system and its owner thread (engine.cpp)

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::actors

namespace pagoda {
using actors::Engine;  // pagoda::Engine
}  // namespace pagoda
