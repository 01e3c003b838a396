// SessionResponder: the Responder of one HTTP request on an HttpSession.
// Serializes in the caller's thread (status line, headers, Content-Length or
// chunked SSE framing) and hands the bytes to the session, which writes them
// on its strand. Exactly one of respond() or start_stream()..end_stream()
// takes effect; later calls are ignored. HEAD requests get the headers only
// (Content-Length of the body they would have had). Every response carries
// `X-Content-Type-Options: nosniff` and the headers given to add_headers()
// (the transport's CORS headers), set before the handler runs.
//
// on_close callbacks run once, when the session closes before the response
// ended (fire_close(), on the strand); a callback registered after that runs
// at once in the registering thread. Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "net/http_exchange.hpp"

namespace pagoda::net {

class HttpSession;

class SessionResponder : public Responder {
 public:
  SessionResponder(std::weak_ptr<HttpSession> session, bool keep_alive, bool head);
  void respond(int status, std::string content_type, std::string body, HeaderList extra = {}) override;
  void start_stream(int status = 200) override;
  bool send_event(std::string data) override;
  void end_stream() override;
  void on_close(std::function<void()> fn) override;
  bool closed() const override;

  bool keep_alive() const { return keep_alive_; }
  // Strand, before the handler gets the responder: headers for every answer.
  void add_headers(HeaderList headers) { common_ = std::move(headers); }
  // Session side, on the strand: the connection closed before the end.
  void fire_close();

 private:
  enum State : int { kNone = 0, kStreaming = 1, kEnded = 2 };
  std::weak_ptr<HttpSession> session_;
  const bool keep_alive_, head_;
  HeaderList common_;  // immutable once the handler runs
  std::atomic<int> state_{kNone};
  mutable std::mutex mu_;
  std::vector<std::function<void()>> callbacks_;
  bool fired_ = false;
};

// "data: <line>\n" per line of `data`, then "\n", as one HTTP chunk.
std::string sse_chunk(std::string_view data);

}  // namespace pagoda::net
