// The contract between the transport (net/http_session.*, Beast) and the HTTP
// API handlers (net/openai_api.*, net/admin_api.*): a parsed request in, and a
// Responder to answer it, once or as a stream of Server-Sent Events.
//
// Threading: a handler is called on the session's strand. The Responder may be
// used from any thread (engine sinks call it from actor threads); it posts
// onto the strand. Exactly one of respond() or start_stream()…end_stream()
// per request; later calls are ignored.
//
// Ownership: the session owns the connection; the Responder holds it weakly.
// When the connection closes (peer gone, timeout, slow consumer, shutdown) the
// session calls every registered on_close callback once, on the strand; a
// handler registers one to cancel its engine requests (disconnect = cancel).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::net {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;                         // "GET", "POST", ...
  std::string path;                           // target without the query, e.g. "/v1/completions"
  std::map<std::string, std::string> query;   // decoded query parameters
  std::map<std::string, std::string> headers; // lower-case names
  std::string body;
  std::string client;                         // the peer's address (per-client limits), e.g. "127.0.0.1"
};

class Responder {
 public:
  virtual ~Responder() = default;
  // A whole response (Content-Length set by the transport).
  virtual void respond(int status, std::string content_type, std::string body,
                       HeaderList extra = {}) = 0;
  // Starts a chunked text/event-stream response (Cache-Control: no-cache).
  virtual void start_stream(int status = 200) = 0;
  // Queues one SSE event; `data` is the payload after "data: " (no newline
  // framing needed: the transport writes "data: <data>\n\n"). Returns false
  // when the connection is gone or its outgoing queue is over the limit (the
  // transport then closes it and runs the on_close callbacks).
  virtual bool send_event(std::string data) = 0;
  // Ends the stream (last chunk); keep-alive continues.
  virtual void end_stream() = 0;
  // Runs `fn` once, on the strand, if the connection closes before the
  // response ended. Registering after the close runs it at once.
  virtual void on_close(std::function<void()> fn) = 0;
  virtual bool closed() const = 0;
};

// An API route handler. handle() runs on the session strand and must not
// block (engine calls are non-blocking: submit, stats, tokenize).
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Returns false when it does not serve this path (the transport then tries
  // static files, then answers 404).
  virtual bool handle(const HttpRequest& request, std::shared_ptr<Responder> responder) = 0;
};

}  // namespace pagoda::net
