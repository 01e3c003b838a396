#include "net/connection_registry.hpp"

namespace pagoda::net {

uint64_t ConnectionRegistry::add() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  live_.emplace(id, std::weak_ptr<Connection>());
  return id;
}

void ConnectionRegistry::attach(uint64_t id, std::weak_ptr<Connection> connection) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it != live_.end()) it->second = std::move(connection);
}

void ConnectionRegistry::remove(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(id);
  }
  cv_.notify_all();
}

std::vector<std::shared_ptr<Connection>> ConnectionRegistry::snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Connection>> out;
  for (auto& [id, weak] : live_) {
    if (auto c = weak.lock()) out.push_back(std::move(c));
  }
  return out;
}

size_t ConnectionRegistry::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

bool ConnectionRegistry::wait_empty(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return live_.empty(); });
}

ConnectionSlot::ConnectionSlot(std::shared_ptr<ConnectionRegistry> registry,
                               std::shared_ptr<ServerContext> context, bool counted)
    : registry_(std::move(registry)), context_(std::move(context)), counted_(counted) {
  id_ = registry_->add();
  if (counted_) context_->connections.fetch_add(1);
}

ConnectionSlot::ConnectionSlot(ConnectionSlot&& other) noexcept { *this = std::move(other); }

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& other) noexcept {
  if (this != &other) {
    release();
    registry_ = std::move(other.registry_);
    context_ = std::move(other.context_);
    id_ = other.id_;
    counted_ = other.counted_;
    other.id_ = 0;
    other.counted_ = false;
  }
  return *this;
}

ConnectionSlot::~ConnectionSlot() { release(); }

void ConnectionSlot::release() {
  if (registry_ && id_ != 0) registry_->remove(id_);
  if (context_ && counted_) context_->connections.fetch_sub(1);
  registry_.reset();
  context_.reset();
  id_ = 0;
  counted_ = false;
}

void ConnectionSlot::attach(std::weak_ptr<Connection> connection) {
  if (registry_ && id_ != 0) registry_->attach(id_, std::move(connection));
}

}  // namespace pagoda::net
