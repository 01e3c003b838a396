// ClientLimits: how many generate requests each client (remote address) has
// in flight, across all its connections: the opt-in hard cap
// ServerOptions::max_requests_per_client (off by default: the engine's
// scheduling policy shares the slots, actors/scheduling_policy.hpp).
// fair_share_client() names the client a request's service is counted
// under for the `fair` policy.
//
// acquire() returns a ticket, or null when the client is at `max`; the count
// drops when the last copy of the ticket is destroyed (the request's sink
// holds it, so it is released when the engine is done with the request).
// Thread-safe; tickets may outlive the ClientLimits object.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pagoda::net {

// The fair-share key of a request: `user_client` (SamplingOptions::client as
// the JSON reader set it from `user`: "user:NAME") when not empty, else
// "addr:" + the peer's address. Pure.
std::string fair_share_client(const std::string& user_client, const std::string& address);

class ClientLimits {
 public:
  using Ticket = std::shared_ptr<void>;
  ClientLimits();
  // A ticket for one request of `client`; null when it already holds `max`
  // (max <= 0: no cap, always a ticket).
  Ticket acquire(const std::string& client, int32_t max);
  // Requests in flight for `client` now.
  int32_t in_flight(const std::string& client) const;

 private:
  struct State {
    mutable std::mutex mu;
    std::unordered_map<std::string, int32_t> count;
  };
  std::shared_ptr<State> state_;
};

}  // namespace pagoda::net
