// ConnectionRegistry: the server's list of live connections (HTTP sessions
// and WebSocket sessions), so that HttpServer::stop() can ask each one to
// finish and then force the rest closed. ConnectionSlot is one connection's
// RAII membership: it also holds one unit of ServerContext::connections
// (when counted), and moves from the HTTP session to the WebSocket session
// on an upgrade. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "net/server_context.hpp"

namespace pagoda::net {

// A live connection. Both calls may come from any thread; they post onto
// the connection's strand.
class Connection {
 public:
  virtual ~Connection() = default;
  // Finish what is in flight (flush queued frames), then close.
  virtual void graceful_stop() = 0;
  // Close the socket now (the session's close callbacks run).
  virtual void force_close() = 0;
};

class ConnectionRegistry {
 public:
  uint64_t add();
  void attach(uint64_t id, std::weak_ptr<Connection> connection);
  void remove(uint64_t id);
  std::vector<std::shared_ptr<Connection>> snapshot();
  size_t size();
  // Waits until no connection is registered or `timeout` passed; true when empty.
  bool wait_empty(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> live_;
};

class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  // Registers a connection; `counted` adds one to context->connections
  // (connections refused for the max_connections limit are not counted).
  ConnectionSlot(std::shared_ptr<ConnectionRegistry> registry,
                 std::shared_ptr<ServerContext> context, bool counted);
  ConnectionSlot(ConnectionSlot&& other) noexcept;
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept;
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  ~ConnectionSlot();  // unregisters, gives the count back

  void attach(std::weak_ptr<Connection> connection);
  bool counted() const { return counted_; }

 private:
  void release();
  std::shared_ptr<ConnectionRegistry> registry_;
  std::shared_ptr<ServerContext> context_;
  uint64_t id_ = 0;
  bool counted_ = false;
};

}  // namespace pagoda::net
