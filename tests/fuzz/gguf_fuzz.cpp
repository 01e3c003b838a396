// Fuzz target: the GGUF reader (model/gguf_file) and what the model layer
// reads from an opened file: the config (config_from_gguf), the tokenizer
// (Tokenizer::from_gguf), the dequantization of every tensor of a supported
// type (all block formats of the type table, gpu/weight_format.hpp) and,
// when config and tokenizer succeed, every tensor through load_llama_weights
// on the CPU backend in both precisions (exact: fp32; quantized: the CPU
// kernels' formats, requantizing the others to Q8_0). Invariants: open()
// either fails with a message naming the file or yields tensors that lie
// inside the file; getters never crash on any key; dequantize() succeeds on
// every tensor tensor_bytes() accepted.
#include <cstring>

#include "fuzz_util.hpp"
#include "gpu/backend.hpp"
#include "model/dequant.hpp"
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

// Dequantizes the tensors of supported types (at most 1 Mi elements each).
void dequantize_tensors(const model::GgufFile& g) {
  std::vector<float> out;
  for (const model::GgufTensorInfo& t : g.tensors()) {
    const model::GgmlTypeTraits* tt = model::ggml_type_traits(t.raw_type);
    const uint64_t n = t.num_elements();
    if (tt == nullptr || tt->dequantize == nullptr || n > (uint64_t{1} << 20)) continue;
    auto bytes = model::tensor_bytes(t.raw_type, n);
    if (!bytes || *bytes != t.nbytes) continue;
    out.resize(n);
    FUZZ_CHECK(model::dequantize(t.raw_type, g.tensor_data(t), out.data(), n).ok(),
               "a tensor of a supported type dequantizes");
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
  dequantize_tensors(*g);
  (void)model::Tokenizer::from_gguf(*g);
  auto config = model::config_from_gguf(*g);
  if (config && backend) {
    for (auto precision : {model::WeightPrecision::kExact, model::WeightPrecision::kQuantized}) {
      model::WeightLoadOptions o;
      o.precision = precision;
      auto w = model::load_llama_weights(scratch.path, **backend, o);
      if (!w) {
        FUZZ_CHECK(w.error().message.find(scratch.path) != std::string::npos,
                   "the load error names the file");
      }
    }
  }
  return 0;
}
