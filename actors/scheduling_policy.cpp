// SchedulingPolicy names (actors/scheduling_policy.hpp).
#include "actors/scheduling_policy.hpp"

namespace pagoda::actors {

std::optional<SchedulingPolicy> parse_scheduling_policy(std::string_view name) {
  if (name == "fcfs") return SchedulingPolicy::fcfs;
  if (name == "fair") return SchedulingPolicy::fair;
  if (name == "priority") return SchedulingPolicy::priority;
  return std::nullopt;
}

std::string_view scheduling_policy_name(SchedulingPolicy p) {
  switch (p) {
    case SchedulingPolicy::fcfs: return "fcfs";
    case SchedulingPolicy::fair: return "fair";
    case SchedulingPolicy::priority: return "priority";
  }
  return "fcfs";
}

}  // namespace pagoda::actors
