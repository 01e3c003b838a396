// The message protocol between the engine's actors (CAF 0.17). All messages
// are local: their types are whitelisted (CAF_ALLOW_UNSAFE_MESSAGE_TYPE), not
// serializable. Handlers take `const T&` and senders std::move (no copies).
//
//   request -> scheduler  (add_atom, AddGroup)          submit a group
//                         (cancel_atom, RequestId)      drop the group
//                         (finish_atom, RequestId, int32 index)  stop string hit
//   scheduler -> request  (events_atom, EventBatch)     one per request per step
//   scheduler -> block manager  request (book_atom, BookingRequest) -> BookingReply
//                         one per step: the prelude (commits, frees, forks), the
//                         running groups' appends, admissions (block_booking.hpp)
//   scheduler -> executor (step_atom, StepPlan)         a plan (up to two queued)
//   executor -> scheduler (result_atom, StepReply)      its answer, in step order
//   scheduler -> scheduler (timeout_atom, uint64 0)     the step watchdog
//   engine -> scheduler   request (stop_atom) -> bool   cancel all; answered once no
//                         step is in flight (then the executor is idle)
//   engine -> scheduler   (spawn_atom, SpawnRequest)    the scheduler spawns the
//                         request actor (so no foreign thread ever spawns: a
//                         spawning thread pins CAF 0.17's logger, see engine.cpp)
//   engine -> scheduler -> block manager (snapshot_atom) publish a KV snapshot if due
//   scheduler -> executor, block manager (reset_atom)   start over (supervision)
//   handle -> scheduler   (abort_atom, RequestId)       user cancel (normal priority:
//                         it never overtakes the request's spawn), forwarded as
//   scheduler -> request  (cancel_atom)                 (the sink gets abort)
#pragma once

#include <caf/all.hpp>

#include <string>
#include <vector>

#include "actors/engine_types.hpp"
#include "actors/block_booking.hpp"
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
using book_atom = caf::atom_constant<caf::atom("book")>;
using result_atom = caf::atom_constant<caf::atom("result")>;
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;
// (compiled_atom, shared_ptr<AddGroup>, error) to a request actor from the
// grammar compiler's thread: its group with the compiled constraint, or an error.
using compiled_atom = caf::atom_constant<caf::atom("compiled")>;
// (fail_atom, std::string) to a request actor: its engine side is lost (a
// remote engine node went down); the sink gets on_error(message).
using fail_atom = caf::atom_constant<caf::atom("fail")>;
// (reset_atom) to the executor: forget every sequence; to the block
// manager: start over with a fresh pool (supervision: the other one was
// replaced, see scheduler_actor.hpp).
using reset_atom = caf::atom_constant<caf::atom("reset")>;
// (progress_atom, uint64_t step_id) from the executor to the scheduler: the
// step's forward pass is issued, its sampling left (Executor::set_progress);
// the scheduler may book the next step now (SchedulerConfig::book_on_progress).
using progress_atom = caf::atom_constant<caf::atom("progress")>;

struct AddGroup {
  RequestId id = 0;
  std::vector<TokenId> prompt;
  SamplingOptions options;  // seed resolved
  // The compiled constraint and token rules (issue 23); nullptr: none.
  std::shared_ptr<const model::ConstraintProgram> constraint;
};

struct SpawnRequest {
  RequestId id = 0;
  GenerateRequest request;
  std::shared_ptr<RequestSink> sink;
};

struct EventBatch {
  std::vector<SeqEvent> events;
};

// The executor's answer to one plan, with its timing (steady clock, ns):
// received = the plan was taken up, compute = forward + sampling.
struct StepReply {
  uint64_t step_id = 0;
  bool ok = true;
  bool skipped = false;  // depends on a failed step: nothing ran
  std::string error;
  StepResult result;
  int64_t received_ns = 0, finished_ns = 0, compute_ns = 0, idle_ns = 0;
  // Host preparation on the step's critical path, and the part done while
  // the step before ran (prepared ahead; 0 when it was not): Executor's
  // last_prep_ns() and last_ahead_ns().
  int64_t prep_ns = 0, ahead_ns = 0;
  int32_t draft_blocks_total = 0, draft_blocks_used = 0;  // the draft model's pool after the step
};

}  // namespace pagoda::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::AddGroup)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<pagoda::actors::AddGroup>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::EventBatch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::SpawnRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::StepPlan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::StepReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::BookingRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pagoda::actors::BookingReply)
