// The router actor: the front end's stand-in for the scheduler when the
// engine runs on remote engine nodes (`pagoda serve --engines ...`,
// docs/scaling.md). It spawns the request actors (tokenizing, detokenizing
// and stop strings stay on the front end) as the scheduler would, and:
//   - connects to every node (middleman connect + hello, both with
//     connect_timeout_s), refusing a node of another protocol version or
//     another model with a clear message; a node that cannot be reached is
//     retried every reconnect_interval_s and joins routing when it answers;
//   - polls each up node's NodeReport every report_interval_ms (timeout
//     report_timeout_s); a node that misses missed_reports_down polls in a
//     row, or whose connection goes down (monitored), is taken out of routing;
//   - sends each new request (all its samples / beams) to one node chosen by
//     choose_node (route_policy.hpp): prefix affinity from the reported block
//     hashes, load, free blocks; a request's events come back to it and go
//     to its request actor; cancels and finished clients go to the node;
//   - while RouterBox::kv() is read, also polls each node's block pool;
//   - when a node is lost, its requests that streamed nothing are re-sent to
//     another node (new wire id; up to max_retries), the others end with
//     on_error("engine_unavailable: ...") through (fail_atom).
// (stop_atom) -> bool cancels every request (sinks get on_done with abort)
// and answers once all request actors are gone (at most 10 s).
// Thread-safety: RouterBox is shared with the RemoteEngine (any thread).
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <vector>

#include "actors/scale_out/router_box.hpp"

namespace pagoda::actors {

// Requires caf::io::middleman loaded and add_remote_message_types called on
// the system's config.
caf::actor spawn_engine_router(caf::actor_system& sys, std::vector<NodeAddress> nodes, RouterConfig config,
                               std::shared_ptr<RouterBox> box);

}  // namespace pagoda::actors
