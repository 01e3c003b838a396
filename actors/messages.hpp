// The message protocol between the engine's actors (CAF 0.17). All messages
// are local: their types are whitelisted (CAF_ALLOW_UNSAFE_MESSAGE_TYPE), not
// serializable. Handlers take `const T&` and senders std::move (no copies).
//
//   request -> scheduler  (add_atom, AddGroup)          submit a group
//                         (cancel_atom, RequestId)      drop the group
//                         (finish_atom, RequestId, int32 index)  stop string hit
//   scheduler -> request  (events_atom, EventBatch)     one per request per step
//   scheduler -> executor request (step_atom, StepPlan) -> StepReply
//   engine -> scheduler   request (stop_atom) -> bool   cancel all; answered once no
//                         step is in flight (then the executor is idle)
//   engine -> scheduler   (spawn_atom, SpawnRequest)    the scheduler spawns the
//                         request actor (so no foreign thread ever spawns: a
//                         spawning thread pins CAF 0.17's logger, see engine.cpp)
//   engine -> scheduler   (snapshot_atom)               publish a KV snapshot if due
//   handle -> scheduler   (abort_atom, RequestId)       user cancel, forwarded as
//   scheduler -> request  (cancel_atom)                 (the sink gets abort)
#pragma once

#include <caf/all.hpp>

#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "actors/scheduler_core.hpp"
#include "actors/step_plan.hpp"

namespace pagoda::actors {

using add_atom = caf::atom_constant<caf::atom("add")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;
using events_atom = caf::atom_constant<caf::atom("events")>;
using step_atom = caf::atom_constant<caf::atom("step")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using spawn_atom = caf::atom_constant<caf::atom("spawn")>;
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;

struct AddGroup {
  RequestId id = 0;
  std::vector<TokenId> prompt;
  SamplingOptions options;  // seed resolved
};

struct SpawnRequest {
  RequestId id = 0;
  GenerateRequest request;
  std::shared_ptr<RequestSink> sink;
};

struct EventBatch {
  std::vector<SeqEvent> events;
};

struct StepReply {
  bool ok = true;
  std::string error;
  StepResult result;
};

}  // namespace pagoda::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::AddGroup)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::EventBatch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::SpawnRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::StepPlan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::StepReply)
