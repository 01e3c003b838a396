// RequestIntake: where requests enter an engine from foreign threads (HTTP
// and WebSocket sessions, the offline API). Shared by Engine (the target is
// the scheduler actor) and RemoteEngine (the target is the router actor).
//
// submit() gives the request an id and, when it has none, a seed, and sends
// (spawn_atom, SpawnRequest) to the target; the target spawns the request
// actor. Before open() and after close() the sink gets on_error at once.
// The handle's cancel() sends (abort_atom, id) to the same target at normal
// priority, so it can never overtake the spawn it cancels.
//
// Thread-safety: every method may be called from any thread; open/close are
// called by the engine's owner thread. Owns a strong handle to the target
// between open() and close() only.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <random>

#include "actors/engine_types.hpp"

namespace pagoda::actors {

class RequestIntake {
 public:
  void open(caf::actor target);
  void close();
  RequestHandle submit(GenerateRequest request, std::shared_ptr<RequestSink> sink);

 private:
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;  // guards target_ and seeds_
  caf::actor target_;
  std::mt19937_64 seeds_{std::random_device{}()};
};

}  // namespace pagoda::actors
