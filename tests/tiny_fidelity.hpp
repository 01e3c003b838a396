// Shared by the tiny-model fidelity tests (llama_fidelity_test.cpp,
// gemma_fidelity_test.cpp): runs the golden sequences of a tiny model of
// tools/gen-arch-goldens.py (HF logits of every position) through LlamaModel
// on the CPU backend (exact fp32 weights), and rebuilds the GGUF that
// llama.cpp's converter wrote of it from the committed listing.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "formats_test_util.hpp"
#include "llama_test_util.hpp"
#include "tiny_gguf_writer.hpp"
#include "model/dequant.hpp"
#include "model/gguf_file.hpp"

namespace pagoda::test {

struct TinyErrors {
  double rel = 0;  // max row-relative error over every position of every sequence
  double abs = 0;  // max abs logit difference
};

// Runs the golden sequences of tiny model `name` (HF logits of every
// position) through the model at `path` (the HF directory or a GGUF), whole
// and (sequences of at most `chunked_up_to` tokens) in chunks of 4, and
// returns the largest errors.
inline TinyErrors tiny_errors(const std::string& name, const std::string& path,
                              const std::string& label, int32_t chunked_up_to = INT32_MAX,
                              int32_t block_size = 16) {
  TinyErrors worst;
  auto backend = cpu_backend();
  model::LoadOptions o;
  o.precision = model::WeightPrecision::kExact;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 4;
  o.max_logits_rows = 64;
  o.block_size = block_size;
  auto m = model::LlamaModel::load(path, *backend, o);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return {1e9, 1e9};
  const TinyGolden g = load_tiny_golden(logits_data(name) + ".json");
  EXPECT_EQ(g.vocab, (*m)->config().vocab_size);
  auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 16);
  EXPECT_TRUE(cache.ok());
  for (size_t s = 0; s < g.ids.size(); ++s) {
    const int32_t len = int32_t(g.ids[s].size());
    const auto blocks = sequential_blocks(len, block_size);
    for (int32_t chunk : {len, 4}) {
      if (chunk != len && len > chunked_up_to) continue;
      std::vector<float> ours = run_sequence(**m, *cache, g.ids[s], blocks, chunk);
      const double rel = max_row_relative_error(ours.data(), g.logits[s].data(), len, g.vocab);
      double abs = 0;
      for (size_t i = 0; i < ours.size(); ++i) {
        abs = std::max(abs, double(std::fabs(ours[i] - g.logits[s][i])));
      }
      std::printf("[%s] sequence %zu (len %d, chunk %d): max row-relative error %.3g, max abs %.3g\n",
                  label.c_str(), s, len, chunk, rel, abs);
      worst.rel = std::max(worst.rel, rel);
      worst.abs = std::max(worst.abs, abs);
    }
  }
  return worst;
}

// Writes the GGUF that llama.cpp's converter made of tiny model `name` as
// `outtype` (f32 / f16): the metadata of its listing (tests/data/logits/
// <name>.gguf.json, tools/gen-arch-goldens.py) and this test's own conversion
// of the committed safetensors, checked to have exactly the listing's tensors
// (names, dims, types).
inline std::string llama_cpp_gguf(const std::string& name, const std::string& outtype,
                                  const std::vector<std::pair<std::string, float>>& extra_f32 = {}) {
  simdjson::dom::parser parser;
  simdjson::dom::element listing = parser.load(logits_data(name) + ".gguf.json")[outtype];
  simdjson::dom::object meta = listing["metadata"];
  TinyGgufOptions opt;
  opt.f16 = outtype == "f16";
  opt.metadata = &meta;
  opt.extra_f32 = extra_f32;
  const std::string path = write_tiny_gguf(logits_data(name), name + "-" + outtype, opt);
  auto g = model::GgufFile::open(path);
  EXPECT_TRUE(g.ok());
  if (!g.ok()) return path;
  simdjson::dom::array tensors = listing["tensors"];
  EXPECT_EQ(g->tensors().size(), tensors.size());
  for (simdjson::dom::element t : tensors) {
    const std::string tname{std::string_view(t["name"])};
    const model::GgufTensorInfo* info = g->find_tensor(tname);
    EXPECT_NE(info, nullptr) << name << ": llama.cpp writes " << tname << ", this converter not";
    if (info == nullptr) continue;
    std::vector<uint64_t> dims;
    for (simdjson::dom::element d : simdjson::dom::array(t["dims"])) dims.push_back(uint64_t(int64_t(d)));
    EXPECT_EQ(info->dims, dims) << tname;
    EXPECT_EQ(std::string(model::ggml_type_name(info->raw_type)), std::string_view(t["type"])) << tname;
    simdjson::dom::array values;
    if (t["values"].get(values) == simdjson::SUCCESS) {  // rope_freqs, rope_factors_*: llama.cpp's values
      const float* ours = reinterpret_cast<const float*>(g->tensor_data(*info));
      size_t i = 0;
      for (simdjson::dom::element v : values) {
        EXPECT_NEAR(ours[i], double(v), 1e-6 * double(v)) << tname << "[" << i << "]";
        ++i;
      }
      EXPECT_EQ(i, info->num_elements());
    }
  }
  return path;
}

inline void check_llama_cpp_gguf(const std::string& name, const std::string& outtype, double max_abs,
                          int32_t chunked_up_to = INT32_MAX) {
  const std::string path = llama_cpp_gguf(name, outtype);
  const TinyErrors e = tiny_errors(name, path, name + " GGUF " + outtype, chunked_up_to);
  std::printf("[%s GGUF %s] worst: max abs %.3g, row-relative %.3g\n", name.c_str(),
              outtype.c_str(), e.abs, e.rel);
  EXPECT_LE(e.abs, max_abs);
}

}  // namespace pagoda::test
