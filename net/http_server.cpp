// HttpServer (net/http_server.hpp): the acceptor, the I/O threads, and the
// stop sequence. Sessions live in http_session.cpp / ws_session.cpp.
//
// max_connections: a connection accepted while ServerContext::connections is
// at the limit is still read (its first request, header_timeout) and then
// answered `503 {"error":...}` with Connection: close, so clients see a clear
// error instead of a reset; while max(limit, 64) such refused connections
// are open, further ones are closed at once without an answer.
#include "net/http_server.hpp"

#include <boost/asio.hpp>

#include <algorithm>
#include <future>
#include <optional>
#include <thread>

#include "net/http_session.hpp"
#include "net/session_env.hpp"

namespace pagoda::net {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

constexpr std::chrono::milliseconds kGracefulWait{2000};
constexpr std::chrono::milliseconds kForcedWait{1000};

}  // namespace

struct HttpServer::Impl {
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  std::shared_ptr<SessionEnv> env;
  std::vector<std::thread> threads;
  std::atomic<bool> stopped{false}, accepting_stopped{false};
  uint16_t port = 0;

  Result<void> listen(const std::string& host, uint16_t port);
  void do_accept();
  void on_accept(error_code ec, tcp::socket socket);
};

Result<void> HttpServer::Impl::listen(const std::string& host, uint16_t want_port) {
  error_code ec;
  const auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return make_error("--host " + host + ": not an IP address (" + ec.message() + ")");
  const tcp::endpoint endpoint(address, want_port);
  if (acceptor.open(endpoint.protocol(), ec); ec) return make_error("socket: " + ec.message());
  if (acceptor.set_option(asio::socket_base::reuse_address(true), ec); ec) {
    return make_error("SO_REUSEADDR: " + ec.message());
  }
  if (acceptor.bind(endpoint, ec); ec) {
    return make_error("cannot bind " + host + ":" + std::to_string(want_port) + ": " + ec.message());
  }
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    return make_error("listen: " + ec.message());
  }
  port = acceptor.local_endpoint().port();
  return {};
}

void HttpServer::Impl::do_accept() {
  acceptor.async_accept(asio::make_strand(ioc),
                        [this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void HttpServer::Impl::on_accept(error_code ec, tcp::socket socket) {
  if (accepting_stopped.load() || !acceptor.is_open()) return;
  if (ec) return do_accept();  // e.g. EMFILE: this connection is lost, keep accepting
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // SSE tokens go out at once
  ServerContext& ctx = *env->context;
  const int32_t limit = std::max<int32_t>(1, ctx.options.max_connections);
  if (ctx.connections.load() < limit) {
    auto s = std::make_shared<HttpSession>(std::move(socket), env, ConnectionSlot(env->registry, env->context, true),
                                           false);
    s->start();
  } else if (env->registry->size() < size_t(ctx.connections.load()) + size_t(std::max(limit, 64))) {
    // The registry also holds the refused sessions still alive (not counted).
    ctx.requests_rejected.fetch_add(1);
    auto s = std::make_shared<HttpSession>(std::move(socket), env,
                                           ConnectionSlot(env->registry, env->context, false), true);
    s->start();
  } else {
    ctx.requests_rejected.fetch_add(1);
    socket.close(ignored);
  }
  do_accept();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const { return impl_->port; }

Result<std::unique_ptr<HttpServer>> HttpServer::start(std::shared_ptr<ServerContext> context,
                                                      std::shared_ptr<HttpHandler> api,
                                                      WsHandlerFactory ws_factory) {
  auto impl = std::make_unique<Impl>();
  impl->env = std::make_shared<SessionEnv>();
  impl->env->context = context;
  impl->env->api = std::move(api);
  impl->env->ws_factory = std::move(ws_factory);
  impl->env->registry = std::make_shared<ConnectionRegistry>();
  if (Result<void> ok = impl->listen(context->options.host, context->options.port); !ok) return ok.error();
  impl->work.emplace(impl->ioc.get_executor());
  Impl* raw = impl.get();
  asio::dispatch(raw->acceptor.get_executor(), [raw] { raw->do_accept(); });
  const size_t n = std::max<size_t>(1, context->options.io_threads);
  for (size_t i = 0; i < n; ++i) raw->threads.emplace_back([raw] { raw->ioc.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  if (s.accepting_stopped.exchange(true)) return;
  std::promise<void> closed;
  asio::post(s.acceptor.get_executor(), [&s, &closed] {
    error_code ignored;
    s.acceptor.close(ignored);
    closed.set_value();
  });
  closed.get_future().wait();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  stop_accepting();
  for (auto& c : s.env->registry->snapshot()) c->graceful_stop();
  if (!s.env->registry->wait_empty(kGracefulWait)) {
    for (auto& c : s.env->registry->snapshot()) c->force_close();
    s.env->registry->wait_empty(kForcedWait);
  }
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace pagoda::net
