// Driver for tools/gen-llamacpp-goldens.py: runs llama.cpp's own evaluation
// (libllama, CPU) of a GGUF on given token ids and prints, per prompt,
// llama.cpp's greedy continuation and the top-k log-probabilities at every
// generated position. Not part of the Pagoda build: the script compiles it
// against an existing llama.cpp build (never CI).
//
// Usage: llamacpp-golden-driver MODEL.gguf STEPS TOPK THREADS < prompts
//   prompts: one prompt per line, token ids separated by spaces.
// Output (stdout): one JSON object per prompt and line:
//   {"ids":[...],"greedy":[STEPS ids],"top":[[[id,logprob],...TOPK],...STEPS]}
// Position t of "top" is the distribution after the prompt plus greedy[0..t-1]
// (the prompt is decoded as one batch, then one token per llama_decode call).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

// log-softmax over the whole vocabulary, then the k largest, best first.
std::vector<std::pair<int, double>> top_logprobs(const float* logits, int n_vocab, int k) {
  double mx = -INFINITY;
  for (int i = 0; i < n_vocab; ++i) mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<int> idx(static_cast<size_t>(n_vocab));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<std::pair<int, double>> out;
  for (int i = 0; i < k; ++i) out.emplace_back(idx[size_t(i)], double(logits[idx[size_t(i)]]) - lse);
  return out;
}

bool run_prompt(llama_context* ctx, int n_vocab, std::vector<llama_token> ids, int steps, int k) {
  llama_memory_clear(llama_get_memory(ctx), true);
  std::printf("{\"ids\":[");
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? "," : "", ids[i]);
  std::string greedy, top;
  llama_batch batch = llama_batch_get_one(ids.data(), int32_t(ids.size()));
  llama_token next = 0;
  for (int t = 0; t < steps; ++t) {
    if (llama_decode(ctx, batch) != 0) return false;
    const auto best = top_logprobs(llama_get_logits_ith(ctx, -1), n_vocab, k);
    next = best[0].first;
    greedy += (t ? "," : "") + std::to_string(next);
    top += t ? ",[" : "[";
    for (size_t i = 0; i < best.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s[%d,%.5f]", i ? "," : "", best[i].first, best[i].second);
      top += buf;
    }
    top += "]";
    batch = llama_batch_get_one(&next, 1);
  }
  std::printf("],\"greedy\":[%s],\"top\":[%s]}\n", greedy.c_str(), top.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf STEPS TOPK THREADS < prompts\n", argv[0]);
    return 2;
  }
  const int steps = std::atoi(argv[2]), k = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 256;
  cp.n_ubatch = 256;
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::fprintf(stderr, "system_info: %s\n", llama_print_system_info());
  for (std::string line; std::getline(std::cin, line);) {
    std::vector<llama_token> ids;
    std::istringstream in(line);
    for (llama_token id; in >> id;) ids.push_back(id);
    if (!ids.empty() && !run_prompt(ctx, n_vocab, ids, steps, k)) return 1;
  }
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
