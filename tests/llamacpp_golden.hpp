// llama.cpp's own evaluation of a GGUF as a golden (tools/gen-llamacpp-goldens.py,
// tools/gen-arch-llamacpp-goldens.py): prompts of token ids, llama.cpp's greedy
// continuation and its top-k log-probabilities at every generated position; and
// the teacher-forced comparison of Pagoda's forward with it (used by
// llamacpp_fidelity_test and arch_llamacpp_test). Header-only.
//
// Teacher-forced: all prompts are prefilled in one batch, then every step
// feeds llama.cpp's greedy token, so one flip does not derail what follows.
// Per position: greedy agreement (a flip is allowed only where llama.cpp's own
// top-1 minus top-2 log-probability is below the tie margin) and |ours -
// llama.cpp's| log-probability of each of llama.cpp's top-k tokens.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "llama_test_util.hpp"

namespace pagoda::test {

struct LlamaCppEntry {
  int32_t id;
  double logprob;
};

struct LlamaCppGolden {
  std::string model;
  int64_t model_bytes = 0;
  std::vector<std::vector<int32_t>> ids, greedy;
  std::vector<std::vector<std::vector<LlamaCppEntry>>> top;  // [prompt][step][rank]
};

// A golden's per-step top-k lists ([[id, logprob], ...] per step) as [step][rank].
inline std::vector<std::vector<LlamaCppEntry>> parse_top_steps(simdjson::dom::array steps_json) {
  std::vector<std::vector<LlamaCppEntry>> steps;
  for (simdjson::dom::element step : steps_json) {
    std::vector<LlamaCppEntry> row;
    for (simdjson::dom::element e : step.get_array()) row.push_back({int32_t(int64_t(e.at(0))), double(e.at(1))});
    steps.push_back(std::move(row));
  }
  return steps;
}

inline LlamaCppGolden load_llamacpp_golden(const std::string& json_path) {
  LlamaCppGolden g;
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.load(json_path);
  g.model = std::string(std::string_view(root["model"]));
  g.model_bytes = int64_t(root["model_bytes"]);
  for (simdjson::dom::element p : root["prompts"].get_array()) {
    std::vector<int32_t> ids, greedy;
    for (int64_t v : p["ids"].get_array()) ids.push_back(int32_t(v));
    for (int64_t v : p["greedy"].get_array()) greedy.push_back(int32_t(v));
    g.ids.push_back(std::move(ids));
    g.greedy.push_back(std::move(greedy));
    g.top.push_back(parse_top_steps(p["top"].get_array()));
  }
  return g;
}

// Our log-softmax rows, [prompt][step] -> [vocab].
using LogprobRows = std::vector<std::vector<std::vector<float>>>;

inline std::vector<float> log_softmax(const float* row, int32_t V) {  // row: [V]
  const double mx = *std::max_element(row, row + V);
  double sum = 0;
  for (int32_t j = 0; j < V; ++j) sum += std::exp(double(row[j]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<float> lp(static_cast<size_t>(V));
  for (int32_t j = 0; j < V; ++j) lp[size_t(j)] = float(double(row[j]) - lse);
  return lp;
}

// Teacher-forced run of every prompt of g (each up to max_len tokens with its
// continuation) on m with cache (room for all prompts' blocks).
inline LogprobRows run_forced(model::LlamaModel& m, gpu::KvCache& cache, const LlamaCppGolden& g,
                              int32_t max_len) {
  const int32_t S = int32_t(g.ids.size()), V = m.config().vocab_size;
  const int32_t bs = m.options().block_size, bps = max_len / bs;
  std::vector<std::vector<int32_t>> tables;
  for (int32_t i = 0; i < S; ++i) tables.push_back(sequential_blocks(max_len, bs, i * bps));
  LogprobRows out(static_cast<size_t>(S));
  std::vector<float> logits(size_t(S) * size_t(V));  // [S, vocab]
  model::ForwardBatch b;
  b.clear(bps);
  for (int32_t i = 0; i < S; ++i) b.add_sequence(g.ids[size_t(i)], 0, tables[size_t(i)], bs);
  for (size_t step = 0; step < g.greedy[0].size(); ++step) {
    auto r = m.forward(b, cache, logits.data());
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) break;
    b.clear(bps);
    for (int32_t i = 0; i < S; ++i) {
      out[size_t(i)].push_back(log_softmax(logits.data() + size_t(i) * size_t(V), V));
      const int32_t& next = g.greedy[size_t(i)][step];
      const int32_t pos = int32_t(g.ids[size_t(i)].size() + step);
      b.add_sequence(std::span<const int32_t>(&next, 1), pos, tables[size_t(i)], bs);
    }
  }
  return out;
}

// The model at path in precision prec, run teacher-forced on g; {} (after a
// failed expectation) when it does not load.
inline LogprobRows run_llamacpp_golden(const std::string& path, const LlamaCppGolden& g,
                                       model::WeightPrecision prec, int32_t max_len) {
  auto backend = cpu_backend();
  auto m = load_small_batch_model(path, *backend, prec, max_len);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return {};
  auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 8 * max_len / 16);
  EXPECT_TRUE(cache.ok());
  if (!cache.ok()) return {};
  LogprobRows rows = run_forced(**m, *cache, g, max_len);
  EXPECT_EQ(rows.size(), g.ids.size());
  for (size_t p = 0; p < rows.size() && p < g.greedy.size(); ++p) {
    EXPECT_EQ(rows[p].size(), g.greedy[p].size()) << "prompt " << p;
  }
  return rows;
}

// One run's comparison with llama.cpp (and with a second run of ours).
struct LlamaCppStats {
  size_t positions = 0, agree = 0;
  double max_flip_margin = 0, max_diff = 0, mean_diff = 0, p99_diff = 0;
  double max_vs_other = 0;  // max |dlogprob| against `other` on llama.cpp's top-k
};

// Requires ours and other shaped like g's top ([prompt][step] -> [vocab]).
// Expects every flip of the greedy token to be at a llama.cpp margin below
// tie_margin (nats).
inline LlamaCppStats compare_with_llamacpp(const LlamaCppGolden& g, const LogprobRows& ours,
                                           const LogprobRows& other, double tie_margin) {
  LlamaCppStats s;
  std::vector<double> diffs;
  for (size_t p = 0; p < g.ids.size(); ++p) {
    for (size_t t = 0; t < g.greedy[p].size(); ++t) {
      const std::vector<float>& lp = ours[p][t];  // [vocab]
      const std::vector<LlamaCppEntry>& top = g.top[p][t];
      ++s.positions;
      const int32_t mine = argmax(lp.data(), int32_t(lp.size()));
      const double margin = top[0].logprob - top[1].logprob;
      if (mine == g.greedy[p][t]) {
        ++s.agree;
      } else {
        s.max_flip_margin = std::max(s.max_flip_margin, margin);
        EXPECT_LT(margin, tie_margin) << "prompt " << p << " step " << t << ": ours " << mine
                                      << ", llama.cpp " << g.greedy[p][t] << " (llama.cpp margin "
                                      << margin << ")";
      }
      for (const LlamaCppEntry& e : top) {
        diffs.push_back(std::fabs(double(lp[size_t(e.id)]) - e.logprob));
        s.max_vs_other = std::max(
            s.max_vs_other, std::fabs(double(lp[size_t(e.id)]) - other[p][t][size_t(e.id)]));
      }
    }
  }
  std::sort(diffs.begin(), diffs.end());
  for (double d : diffs) s.mean_diff += d / double(diffs.size());
  s.max_diff = diffs.back();
  s.p99_diff = diffs[diffs.size() * 99 / 100];
  return s;
}

inline void print_llamacpp_stats(const std::string& label, const LlamaCppStats& s) {
  std::printf("[%s] greedy agreement %zu/%zu (largest llama.cpp margin at a flip %.3f),"
              " top-k |dlogprob| mean %.4f p99 %.4f max %.4f; vs our other path max %.4f\n",
              label.c_str(), s.agree, s.positions, s.max_flip_margin, s.mean_diff, s.p99_diff,
              s.max_diff, s.max_vs_other);
}

}  // namespace pagoda::test
