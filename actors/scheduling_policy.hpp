// SchedulingPolicy: the order in which the scheduler core admits waiting
// groups (and, for `priority` and `fair`, which running group it preempts).
//   fcfs     arrival order; a preempted group goes back to the front.
//   fair     the Virtual Token Counter (actors/fair_share.hpp): the head
//            request of the backlogged client with the least weighted
//            service first; FCFS within a client. With every sequence
//            slot (or too many KV blocks) taken, the best waiting group W
//            of client C may preempt (recompute, as under KV pressure):
//            before a booking, while W would not fit by the last booking's
//            counts, the newest running group of the client with the
//            highest counter is preempted, if
//              (a) that client holds at least as many sequence slots as
//                  C would with W (C is served less than it, not only
//                  cheaper: no trading places between equals),
//              (b) that client's counter is above C's, or equal to it
//                  with strictly more slots held than C would hold, and
//              (c) the group was never a fairness victim before.
//            (a) and (b) make a preemption move a slot from a client that
//            holds more and has had more to one that holds less and has had
//            less; (c) recomputes a group at most once for fairness: with
//            finitely many requests every one finishes (no livelock, no
//            thrashing). (a) is not "C has nothing running": a light client
//            whose previous request still decodes would then wait for a
//            slot again (the bench's light client overlaps its requests).
//            No margin of one request's cost in (b): the lift puts a client
//            that becomes backlogged at the flood's counter less W's prompt
//            cost (the lift's credit, fair_share.hpp), so a margin would hold
//            W back; equal counters (a lift without credit, or a credit used
//            up) qualify when the victim's client holds more slots, so W
//            need not wait the step in which the flood is charged. A swap back
//            needs the victim's client to fall below C's counter and slots:
//            then it is VTC's own order, and (c) bounds it. The service-
//            difference bound of fair_share.hpp is kept: preemption charges nothing (the prompt
//            is not charged again, recomputed tokens are not charged as
//            output) and only moves a slot from a higher counter to a lower
//            one, the order VTC admits in anyway.
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
