#include "net/session_responder.hpp"

#include <boost/beast/http.hpp>

#include <cstdio>
#include <sstream>

#include "net/http_session.hpp"

namespace pagoda::net {
namespace {

namespace http = boost::beast::http;

template <class Header>
std::string serialize_header(const Header& h) {
  std::ostringstream os;
  os << h;
  return os.str();
}

}  // namespace

std::string sse_chunk(std::string_view data) {
  std::string event;
  event.reserve(data.size() + 16);
  size_t pos = 0;
  while (true) {
    const size_t nl = data.find('\n', pos);
    event += "data: ";
    event.append(data.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    event += '\n';
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  event += '\n';
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", event.size());
  std::string chunk = size;
  chunk += event;
  chunk += "\r\n";
  return chunk;
}

SessionResponder::SessionResponder(std::weak_ptr<HttpSession> session, bool keep_alive, bool head)
    : session_(std::move(session)), keep_alive_(keep_alive), head_(head) {}

void SessionResponder::respond(int status, std::string content_type, std::string body,
                               HeaderList extra) {
  int expected = kNone;
  if (!state_.compare_exchange_strong(expected, kEnded)) return;
  auto session = session_.lock();
  if (!session) return;
  http::response<http::string_body> res;
  res.version(11);
  res.result(unsigned(status));
  res.set(http::field::server, "pagoda");
  res.set(http::field::content_type, content_type);
  res.set("X-Content-Type-Options", "nosniff");
  for (auto& [name, value] : common_) res.set(name, value);
  for (auto& [name, value] : extra) res.set(name, value);
  res.keep_alive(keep_alive_);
  res.body() = std::move(body);
  res.prepare_payload();
  std::string bytes = serialize_header(res.base());
  if (!head_) bytes += res.body();
  session->offer(this, std::move(bytes), true, false);
}

void SessionResponder::start_stream(int status) {
  int expected = kNone;
  if (!state_.compare_exchange_strong(expected, kStreaming)) return;
  auto session = session_.lock();
  if (!session) return;
  http::response<http::empty_body> res;
  res.version(11);
  res.result(unsigned(status));
  res.set(http::field::server, "pagoda");
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Content-Type-Options", "nosniff");
  for (auto& [name, value] : common_) res.set(name, value);
  res.keep_alive(keep_alive_);
  res.chunked(true);
  session->offer(this, serialize_header(res.base()), false, false);
}

bool SessionResponder::send_event(std::string data) {
  if (state_.load() != kStreaming) return false;
  auto session = session_.lock();
  if (!session) return false;
  return session->offer(this, sse_chunk(data), false, true);
}

void SessionResponder::end_stream() {
  int expected = kStreaming;
  if (!state_.compare_exchange_strong(expected, kEnded)) return;
  if (auto session = session_.lock()) session->offer(this, "0\r\n\r\n", true, false);
}

void SessionResponder::on_close(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fired_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

bool SessionResponder::closed() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fired_) return true;
  }
  auto session = session_.lock();
  return !session || session->is_closed();
}

void SessionResponder::fire_close() {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fired_) return;
    fired_ = true;
    callbacks.swap(callbacks_);
  }
  for (auto& fn : callbacks) fn();
}

}  // namespace pagoda::net
