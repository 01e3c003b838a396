#include "actors/worker_policy.hpp"

#include <algorithm>
#include <chrono>

namespace pagoda::actors {

void configure_workers(caf::actor_system_config& config, size_t threads) {
  config.set("scheduler.max-threads", std::max<size_t>(threads, 1));
  config.set("scheduler.max-throughput", 300);
  // Busy polls (a few microseconds) catch a reply that is already on its way.
  config.set("work-stealing.aggressive-poll-attempts", 64);
  config.set("work-stealing.aggressive-steal-interval", 8);
  // No sleeping polls: straight to the condition variable (woken by enqueue).
  config.set("work-stealing.moderate-poll-attempts", 0);
  config.set("work-stealing.moderate-steal-interval", 1);
  // The wait's timeout: an idle worker looks for work to steal this often.
  config.set("work-stealing.relaxed-steal-interval", 1);
  config.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(5)});
}

}  // namespace pagoda::actors
