// How an actor system's cooperative workers (the CAF work-stealing pool that
// runs request actors, routers and the middleman's brokers) wait for work.
//
// CAF 0.17's default keeps an idle worker polling: 100 busy polls, then 500
// polls with a 50 us sleep between them (about 30 ms), and only then a
// condition-variable wait. Tokens reach the request actors every few
// milliseconds, so the workers never got past the 50 us polls: about 13-15 k
// context switches a second at batch 1, each one taking a core from the
// executor's compute threads on a small machine (measured with perf stat,
// tools/bench_overlap). configure_workers keeps the short busy poll and then
// sleeps on the worker's condition variable at once, which an enqueue
// signals, so waking costs one notify instead of a poll loop.
//
// Contract: call before the actor_system is constructed from `config`.
// threads >= 1 is scheduler.max-threads; max-throughput is 300 messages per
// resume, so one busy actor cannot hold a worker for a whole mailbox.
#pragma once

#include <caf/actor_system_config.hpp>
#include <cstddef>

namespace pagoda::actors {

void configure_workers(caf::actor_system_config& config, size_t threads);

}  // namespace pagoda::actors
