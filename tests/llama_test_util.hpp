// Test helpers for the forward-pass tests (llama_model_test, llama_fidelity_test,
// paging_proof_test): the CPU backend, the logits goldens of
// tools/gen-logits-goldens.py, running one sequence through
// LlamaModel::forward with a given block table, and error measures.
// Header-only.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_backend.hpp"
#include "model/forward_batch.hpp"
#include "model/llama_model.hpp"
#include "model/model_config.hpp"

namespace pagoda::test {

inline std::string logits_data(const std::string& name) {
  return std::string(PAGODA_TEST_DATA_DIR) + "/logits/" + name;
}

// The HF transformers greedy goldens of the default model
// (tests/data/logits/smollm2.json, tools/gen-logits-goldens.py): prompt ids
// and the 32 tokens transformers' greedy search continues each with.
struct GreedyGolden {
  std::vector<std::vector<int32_t>> ids, greedy;
};

inline GreedyGolden load_greedy_golden() {
  GreedyGolden g;
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.load(logits_data("smollm2.json"));
  for (simdjson::dom::element p : root["prompts"].get_array()) {
    std::vector<int32_t> ids, greedy;
    for (int64_t v : p["ids"].get_array()) ids.push_back(int32_t(v));
    for (int64_t v : p["greedy"].get_array()) greedy.push_back(int32_t(v));
    g.ids.push_back(ids);
    g.greedy.push_back(greedy);
  }
  return g;
}

inline std::unique_ptr<gpu::Backend> cpu_backend(size_t threads = 0) {
  gpu::BackendOptions o;
  o.cpu_threads = threads;
  return std::make_unique<gpu::cpu::CpuBackend>(o);
}

// The model at `path` on `backend` for up to 8 sequences of max_len tokens
// (256 batched), in precision `prec`; the load's error as is.
inline auto load_small_batch_model(const std::string& path, gpu::Backend& backend, model::WeightPrecision prec,
                                   int32_t max_len) {
  model::LoadOptions o;
  o.precision = prec;
  o.max_num_batched_tokens = 256;
  o.max_num_seqs = 8;
  o.max_model_len = max_len;
  return model::LlamaModel::load(path, backend, o);
}

// tiny-*.json: sequences of ids and the logits of every position.
struct TinyGolden {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> logits;  // [seq] -> [len * vocab]
  int32_t vocab = 0;
};

inline TinyGolden load_tiny_golden(const std::string& json_path) {
  TinyGolden g;
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.load(json_path);
  for (simdjson::dom::element seq : root["sequences"].get_array()) {
    std::vector<int32_t> ids;
    for (int64_t id : seq["ids"].get_array()) ids.push_back(int32_t(id));
    std::vector<float> logits;
    for (simdjson::dom::element row : seq["logits"].get_array()) {
      int32_t n = 0;
      for (double v : row.get_array()) {
        logits.push_back(float(v));
        ++n;
      }
      g.vocab = n;
    }
    g.ids.push_back(std::move(ids));
    g.logits.push_back(std::move(logits));
  }
  return g;
}

// "" when ModelConfig read the rope settings of an HF config.json (top-level
// rope_theta/rope_scaling, or transformers 5's rope_parameters); else why not.
inline std::string rope_config_problem(const std::string& model_dir, const model::ModelConfig& c) {
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.load(model_dir + "/config.json");
  simdjson::dom::element rp;
  if (root["rope_parameters"].get(rp) != simdjson::SUCCESS) return "";
  const double theta = double(rp["rope_theta"]);
  const std::string_view type = std::string_view(rp["rope_type"]);
  const bool llama3 = type == "llama3";
  if (c.rope_theta != theta ||
      (llama3 != (c.rope_scaling.type == model::RopeScalingType::kLlama3))) {
    return "model_config does not read transformers-5 'rope_parameters' in " + model_dir +
           "/config.json (rope_theta " + std::to_string(c.rope_theta) + " vs " +
           std::to_string(theta) + ", rope_type " + std::string(type) + " vs " +
           model::rope_scaling_name(c.rope_scaling.type) + ")";
  }
  return "";
}

// Sequential block ids 0..n-1 (enough for len tokens).
inline std::vector<int32_t> sequential_blocks(int32_t len, int32_t block_size, int32_t first = 0) {
  std::vector<int32_t> b(size_t((len + block_size - 1) / block_size));
  for (size_t i = 0; i < b.size(); ++i) b[i] = first + int32_t(i);
  return b;
}

// Prefills `ids` (a fresh sequence) in chunks of `chunk` tokens using block
// table `blocks`; returns the logits of every position [len, vocab].
inline std::vector<float> run_sequence(model::LlamaModel& m, gpu::KvCache& cache,
                                       const std::vector<int32_t>& ids,
                                       const std::vector<int32_t>& blocks, int32_t chunk) {
  const int32_t V = m.config().vocab_size, bs = m.options().block_size;
  std::vector<float> out(ids.size() * size_t(V));
  model::ForwardBatch b;
  for (int32_t pos = 0; pos < int32_t(ids.size()); pos += chunk) {
    const int32_t n = std::min<int32_t>(chunk, int32_t(ids.size()) - pos);
    b.clear(int32_t(blocks.size()));
    b.add_sequence(std::span<const int32_t>(ids.data() + pos, size_t(n)), pos, blocks, bs,
                   true, /*all_logits=*/true);
    auto r = m.forward(b, cache, out.data() + size_t(pos) * size_t(V));
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) break;
  }
  return out;
}

// max over rows of max_j |a - b| / max_j |b|: the error relative to the row's scale.
inline double max_row_relative_error(const float* a, const float* b, int64_t rows, int64_t cols) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double diff = 0, scale = 0;
    for (int64_t j = 0; j < cols; ++j) {
      diff = std::max(diff, std::fabs(double(a[r * cols + j]) - b[r * cols + j]));
      scale = std::max(scale, std::fabs(double(b[r * cols + j])));
    }
    worst = std::max(worst, std::isnan(diff) ? INFINITY : diff / std::max(scale, 1e-30));
  }
  return worst;
}

inline double max_abs_error(const float* a, const float* b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

inline int32_t argmax(const float* v, int32_t n) {
  return int32_t(std::max_element(v, v + n) - v);
}

}  // namespace pagoda::test
