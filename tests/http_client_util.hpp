// A small Beast client for the transport tests: HTTP/1.1 requests and
// WebSocket frames over loopback, every operation bounded by a deadline (the
// test fails instead of hanging). Async operations driven by the test
// thread's own io_context. Not thread-safe: one client per test thread.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using error_code = boost::system::error_code;
using tcp = asio::ip::tcp;
using Response = http::response<http::string_body>;

// Runs one async operation `start(handler)` to completion or `limit`; on
// timeout `cancel()` is called and the operation drained; returns its error
// (asio::error::timed_out on timeout).
template <class Start, class Cancel>
error_code await(asio::io_context& ioc, Start&& start, Cancel&& cancel,
                 std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  std::optional<error_code> result;
  start([&result](error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!result && ioc.run_one_until(deadline) > 0) {
  }
  if (result) return *result;
  cancel();
  ioc.restart();
  while (!result && ioc.run_one() > 0) {
  }
  return asio::error::timed_out;
}

class HttpClient {
 public:
  explicit HttpClient(uint16_t port) : stream_(ioc_) {
    error_code ec = await(ioc_, [&](auto h) {
      stream_.async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), port), h);
    }, [&] { stream_.close(); });
    connected_ = !ec;
  }
  bool connected() const { return connected_; }

  error_code send(const http::request<http::string_body>& req) {
    return await(ioc_, [&](auto h) { http::async_write(stream_, req, h); }, [&] { stream_.close(); });
  }
  error_code send_raw(const std::string& bytes) {
    return await(ioc_, [&](auto h) { asio::async_write(stream_, asio::buffer(bytes), h); },
                 [&] { stream_.close(); });
  }
  // Reads one response (body included: SSE streams until their last chunk).
  error_code read(Response& res, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    return await(ioc_, [&](auto h) { http::async_read(stream_, buffer_, res, h); }, [&] { stream_.close(); },
                 limit);
  }
  error_code read_header(http::response_parser<http::string_body>& parser) {
    return await(ioc_, [&](auto h) { http::async_read_header(stream_, buffer_, parser, h); },
                 [&] { stream_.close(); });
  }
  // Waits for the server to close: returns the read's error (eof expected).
  error_code read_until_closed(std::chrono::milliseconds limit) {
    char sink[4096];
    while (true) {
      error_code ec = await(ioc_, [&](auto h) { stream_.async_read_some(asio::buffer(sink), h); },
                            [&] { stream_.close(); }, limit);
      if (ec) return ec;
    }
  }
  Response request(http::verb verb, const std::string& target, std::string body = {},
                   std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    // Every POST route takes JSON; the transport answers 415 without this.
    if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
    for (auto& [k, v] : headers) req.set(k, v);
    req.body() = std::move(body);
    req.prepare_payload();
    Response res;
    if (send(req)) return res;
    last_error_ = read(res);
    return res;
  }
  error_code last_error() const { return last_error_; }
  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
  error_code last_error_;
};

class WsClient {
 public:
  explicit WsClient(uint16_t port) : port_(port), ws_(ioc_) {}
  // Connects and upgrades; `decorate` adds request headers. Returns the
  // handshake's error; the server's answer is in response().
  error_code connect(const std::string& target, std::vector<std::pair<std::string, std::string>> headers = {}) {
    error_code ec = await(ioc_, [&](auto h) {
      beast::get_lowest_layer(ws_).async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), port_), h);
    }, [&] { beast::get_lowest_layer(ws_).close(); });
    if (ec) return ec;
    ws_.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
      for (auto& [k, v] : headers) req.set(k, v);
    }));
    return await(ioc_, [&](auto h) {
      ws_.async_handshake(response_, "127.0.0.1:" + std::to_string(port_), target, h);
    }, [&] { beast::get_lowest_layer(ws_).close(); });
  }
  const websocket::response_type& response() const { return response_; }
  error_code write(const std::string& data, bool text = true) {
    ws_.text(text);
    return await(ioc_, [&](auto h) { ws_.async_write(asio::buffer(data), h); },
                 [&] { beast::get_lowest_layer(ws_).close(); });
  }
  error_code read(std::string& out, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    beast::flat_buffer buf;
    error_code ec = await(ioc_, [&](auto h) { ws_.async_read(buf, h); },
                          [&] { beast::get_lowest_layer(ws_).close(); }, limit);
    out = beast::buffers_to_string(buf.data());
    return ec;
  }
  error_code close(uint16_t code = 1000) {
    return await(ioc_, [&](auto h) { ws_.async_close(websocket::close_reason(websocket::close_code(code)), h); },
                 [&] { beast::get_lowest_layer(ws_).close(); });
  }
  websocket::close_reason reason() const { return ws_.reason(); }
  void drop() { beast::get_lowest_layer(ws_).close(); }

 private:
  uint16_t port_;
  asio::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_;
  websocket::response_type response_;
};

}  // namespace pagoda::testing
