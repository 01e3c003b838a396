// SchedulingPolicy: the order in which the scheduler core admits waiting
// groups (and, for `priority`, which running group it preempts).
//   fcfs     arrival order; a preempted group goes back to the front.
//   fair     the Virtual Token Counter (actors/fair_share.hpp): the head
//            request of the backlogged client with the least weighted
//            service first; FCFS within a client. With every sequence
//            slot (or too many KV blocks) taken, the best waiting group W
//            of client C may preempt (recompute, as under KV pressure):
//            before a booking, while W would not fit by the last booking's
//            counts, the newest running group of the client with the
//            highest counter is preempted, if
//              (a) C has no running group (C is not being served at all),
//              (b) that client's counter exceeds C's counter plus W's prompt
//                  cost (what admitting W charges), and
//              (c) the group was never a fairness victim before.
//            (b) keeps the VTC order after the swap: C, even charged, is
//            still below the victim's client, so the victim (re-queued at
//            the front, already charged) can never preempt back, and two
//            clients within one request's cost of each other never trade
//            places: no ping-pong. (a) limits the preemptions to one per
//            admission of a client nothing of which runs, and (c) bounds the
//            recomputed work to once per group; with a finite number of
//            requests every one finishes (no livelock). The service-
//            difference bound of fair_share.hpp is kept: preemption charges
//            nothing (no prompt re-charge, no output re-charge for the
//            recomputed tokens) and only ever moves a slot from a higher to
//            a lower counter, which is the order VTC admits in anyway.
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
