// SchedulingPolicy: the order in which the scheduler core admits waiting
// groups (and, for `priority`, which running group it preempts).
//   fcfs     arrival order; a preempted group goes back to the front.
//   fair     the Virtual Token Counter (actors/fair_share.hpp): the head
//            request of the backlogged client with the least weighted
//            service first; FCFS within a client.
//   priority SamplingOptions::priority, lower first (vLLM's meaning), FCFS
//            within a value; running groups are ordered the same way, so the
//            lowest-priority one is preempted first, and a waiting group
//            preempts running groups of a larger value when it does not fit.
// Plain values; parse/name are pure.
#pragma once

#include <optional>
#include <string_view>

namespace pagoda::actors {

enum class SchedulingPolicy { fcfs, fair, priority };

// "fcfs", "fair" or "priority"; nullopt for anything else.
std::optional<SchedulingPolicy> parse_scheduling_policy(std::string_view name);
std::string_view scheduling_policy_name(SchedulingPolicy p);

}  // namespace pagoda::actors
