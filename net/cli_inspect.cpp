// `pagoda inspect MODEL`: a JSON summary of a model (.gguf file or HF directory).
#include <iostream>

#include "model/model_inspect.hpp"
#include "net/cli.hpp"

namespace pagoda::net {

void add_inspect_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("inspect", "Print a JSON summary of a model");
  auto model = std::make_shared<std::string>();
  cmd->add_option("model", *model, "A .gguf file or a HuggingFace model directory")->required();
  cmd->callback([model, &exit_code] {
    Result<std::string> json = model::inspect_model_json(*model);
    if (!json) {
      std::cerr << "pagoda inspect: " << json.error().message << "\n";
      exit_code = 1;
      return;
    }
    std::cout << *json;
    if (json->empty() || json->back() != '\n') std::cout << "\n";
  });
}

}  // namespace pagoda::net
