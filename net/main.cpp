// Process entry point for the `pagoda` binary (see net/cli.hpp).
#include <CLI/CLI.hpp>

#include "net/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Pagoda: a PagedAttention LLM inference server"};
  app.require_subcommand(1);
  int exit_code = 0;
  pagoda::net::add_inspect_command(app, exit_code);
  pagoda::net::add_tokenize_command(app, exit_code);
  pagoda::net::add_chat_template_command(app, exit_code);
  pagoda::net::add_generate_command(app, exit_code);
  pagoda::net::add_serve_command(app, exit_code);
  pagoda::net::add_engine_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
