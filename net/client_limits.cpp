// ClientLimits (net/client_limits.hpp).
#include "net/client_limits.hpp"

namespace pagoda::net {

std::string fair_share_client(const std::string& user_client, const std::string& address) {
  return user_client.empty() ? "addr:" + address : user_client;
}

ClientLimits::ClientLimits() : state_(std::make_shared<State>()) {}

ClientLimits::Ticket ClientLimits::acquire(const std::string& client, int32_t max) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    int32_t& n = state_->count[client];
    if (max > 0 && n >= max) {
      if (n == 0) state_->count.erase(client);
      return nullptr;
    }
    ++n;
  }
  // The deleter releases the slot (it deletes nothing; the pointer is only
  // non-null so that the ticket tests true) and keeps the state alive.
  auto release = [state = state_, client](void*) {
    std::lock_guard<std::mutex> lock(state->mu);
    auto it = state->count.find(client);
    if (it != state->count.end() && --it->second <= 0) state->count.erase(it);
  };
  return Ticket(static_cast<void*>(state_.get()), std::move(release));
}

int32_t ClientLimits::in_flight(const std::string& client) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->count.find(client);
  return it == state_->count.end() ? 0 : it->second;
}

}  // namespace pagoda::net
