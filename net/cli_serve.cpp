// `pagoda serve MODEL`: the HTTP/WebSocket server. The network front end is
// not built yet; the command says so instead of pretending to serve.
#include <iostream>

#include "net/cli.hpp"

namespace pagoda::net {

void add_serve_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over HTTP and WebSocket");
  auto model = std::make_shared<std::string>();
  auto host = std::make_shared<std::string>("127.0.0.1");
  auto port = std::make_shared<int>(8000);
  cmd->add_option("model", *model, "A .gguf file or a HuggingFace model directory")->required();
  cmd->add_option("--host", *host, "Address to listen on");
  cmd->add_option("--port", *port, "Port to listen on");
  cmd->callback([&exit_code] {
    std::cerr << "pagoda serve: the network front end (HTTP, WebSocket, web UI) is not "
                 "implemented yet; see the open issue 'Network front end'.\n";
    exit_code = 1;
  });
}

}  // namespace pagoda::net
