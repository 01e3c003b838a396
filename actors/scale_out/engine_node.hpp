// EngineNode: makes an in-process Engine an engine node of a scale-out
// deployment (`pagoda engine MODEL --listen HOST:PORT`, docs/scaling.md). It
// runs its own CAF actor system with the io middleman and publishes one entry
// actor on HOST:PORT that speaks actors/scale_out/remote_protocol.hpp:
//   - hello: answers NodeHello, or refuses a front end of another protocol
//     version with an error naming both;
//   - submit: runs the request on the Engine (Engine::submit with prompt ids;
//     the node's request actor applies stop strings and finishes samples) and
//     streams token ids, beams and finishes back to the front end;
//   - rcancel: cancels it; report: answers the load and the block hashes of
//     what it served last (prefix affinity);
//   - it monitors every front end it heard from: when one goes down (process
//     gone, link lost) every request that front end sent is cancelled, so all
//     their KV blocks return to the pool.
// Thread-safety: start/stop/~EngineNode from any one thread. The engine must
// outlive the node (stop() the node first). Sink callbacks run on the
// engine's actor threads and only anon_send into the node's system.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/engine.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

struct EngineNodeOptions {
  std::string host = "127.0.0.1";  // bind address (the middleman has no TLS/auth)
  uint16_t port = 0;               // 0: any free port
  size_t max_reported_hashes = 4096;
};

class EngineNode {
 public:
  // Errors: the port cannot be bound.
  static Result<std::unique_ptr<EngineNode>> start(std::shared_ptr<Engine> engine,
                                                   const EngineNodeOptions& options);
  ~EngineNode();  // = stop()
  EngineNode(const EngineNode&) = delete;
  EngineNode& operator=(const EngineNode&) = delete;

  // Stops the entry actor and the middleman (front ends see the node down).
  // Idempotent.
  void stop();
  uint16_t port() const;

  struct Impl;

 private:
  explicit EngineNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::actors
