// The `pagoda` command line: one function per subcommand, each registering its
// options on the CLI11 app and returning the callback's exit code through
// `exit_code`. Runs on the main thread; prints results on stdout and errors on
// stderr (exit code 1 for a failed command, 2 for bad usage).
#pragma once

#include <CLI/CLI.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace pagoda::net {

// A JSON array of numbers, e.g. token ids or logprobs: "[1,2,3]".
template <class T>
std::string json_list(const std::vector<T>& values) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << ']';
  return out.str();
}

void add_inspect_command(CLI::App& app, int& exit_code);
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_chat_template_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace pagoda::net
