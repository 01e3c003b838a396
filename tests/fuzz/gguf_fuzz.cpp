// Fuzz target: the GGUF reader (model/gguf_file) and what the model layer
// reads from an opened file: the config (config_from_gguf), the tokenizer
// (Tokenizer::from_gguf) and, when those succeed, every tensor through
// load_llama_weights on the CPU backend. Invariants: open() either fails
// with a message naming the file or yields tensors that lie inside the file;
// getters never crash on any key.
#include <cstring>

#include "fuzz_util.hpp"
#include "gpu/backend.hpp"
#include "model/gguf_file.hpp"
#include "model/llama_weights.hpp"
#include "model/model_config.hpp"
#include "model/tokenizer.hpp"

using namespace pagoda;

namespace {

void read_metadata(const model::GgufFile& g) {
  for (const auto& [key, value] : g.metadata()) {
    (void)g.get_string(key);
    (void)g.get_int(key);
    (void)g.get_float(key);
    (void)g.get_bool(key);
    (void)g.get_string_array(key);
    (void)g.get_int_array(key);
    (void)g.get_float_array(key);
    FUZZ_CHECK(g.find(key) == &value, "find returns the listed value");
  }
}

void check_tensors(const model::GgufFile& g) {
  for (const model::GgufTensorInfo& t : g.tensors()) {
    FUZZ_CHECK(t.offset <= g.file_size() && t.nbytes <= g.file_size() - t.offset,
               "tensor data inside the file");
    FUZZ_CHECK(g.find_tensor(t.name) == &t, "find_tensor returns the listed tensor");
    if (t.nbytes > 0) {
      volatile uint8_t sink = g.tensor_data(t)[0];
      sink = g.tensor_data(t)[t.nbytes - 1];
      (void)sink;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchFile scratch(".gguf");
  static auto backend = gpu::make_backend(gpu::BackendKind::kCpu);
  if (!fuzz::write_scratch(scratch.path, data, size)) return 0;
  auto g = model::GgufFile::open(scratch.path);
  if (!g) {
    FUZZ_CHECK(g.error().message.find(scratch.path) != std::string::npos,
               "the error names the file");
    return 0;
  }
  read_metadata(*g);
  check_tensors(*g);
  (void)model::Tokenizer::from_gguf(*g);
  auto config = model::config_from_gguf(*g);
  if (config && backend) {
    auto w = model::load_llama_weights(scratch.path, **backend);
    if (!w) {
      FUZZ_CHECK(w.error().message.find(scratch.path) != std::string::npos,
                 "the load error names the file");
    }
  }
  return 0;
}
