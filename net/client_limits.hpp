// ClientLimits: how many generate requests each client (remote address) has
// in flight, across all its connections, so that one client cannot take
// every scheduler slot (ServerOptions::max_requests_per_client).
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
