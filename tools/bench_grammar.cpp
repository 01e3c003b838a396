// bench_grammar: the structured-output costs of issue 23 item 7 on a model's
// vocabulary (default: the real SmolLM2, 49,152 tokens), without the model's
// forward pass:
//  - compile of a typical tool schema: cold (a new GrammarCompiler, its
//    cache empty) and cached (the same source again), median of --reps;
//  - mask fill per sequence: a TokenMatcher walks the tokens of valid
//    documents of several schemas; each step's fill_mask is timed; p50 / p99
//    / max over every step of every walk (one thread).
// Each is reported in wall time and in CPU time (the compile: the process's,
// which is the compiler worker's; a fill: the calling thread's), since wall
// times on a shared machine include waiting for a core.
// Usage: bench_grammar [model.gguf] [--reps N]
// Prints one line per measurement; thread: the caller's (the compiler's own
// worker does the compiles, the caller waits).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/gguf_file.hpp"
#include "model/grammar_compiler.hpp"
#include "model/grammar_vocab.hpp"
#include "model/token_matcher.hpp"

using namespace pagoda::model;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double cpu_ms(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

const char* kToolSchema =
    R"({"type":"object","properties":{"location":{"type":"string","description":"City and country"},)"
    R"("unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":14},)"
    R"("include":{"type":"array","items":{"type":"string","enum":["wind","rain","uv"]},"maxItems":3}},)"
    R"("required":["location","unit"],"additionalProperties":false})";

struct Walk {
  const char* schema;
  const char* document;
};

const Walk kWalks[] = {
    {kToolSchema, R"({"location": "Paris, France", "unit": "celsius", "days": 3, "include": ["wind", "uv"]})"},
    {R"({"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","tags"]})",
     R"({"name": "A long name with several words in it, and more", "tags": ["alpha", "beta", "gamma delta"]})"},
    {R"({"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"},{"type":"null"}]},"ok":{"type":"boolean"}},"required":["v","ok"]})",
     R"({"v": "free text here", "ok": true})"},
};

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") +
                     "/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else path = argv[i];
  }
  auto gguf = GgufFile::open(path);
  if (!gguf) return std::fprintf(stderr, "bench_grammar: %s\n", gguf.error().message.c_str()), 1;
  auto tok = Tokenizer::from_gguf(*gguf);
  if (!tok) return std::fprintf(stderr, "bench_grammar: %s\n", tok.error().message.c_str()), 1;
  const int32_t vocab = (*tok)->vocab_size();
  auto t0 = std::chrono::steady_clock::now();
  auto info = grammar_tokenizer_info(**tok, vocab, {(*tok)->eos_id()});
  if (!info) return std::fprintf(stderr, "bench_grammar: %s\n", info.error().message.c_str()), 1;
  std::printf("vocabulary: %d tokens; TokenizerInfo built in %.1f ms\n", vocab, ms_since(t0));

  std::vector<double> cold, cold_cpu, cached;
  for (int r = 0; r < reps; ++r) {
    GrammarCompiler c(*info);
    t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
    auto g = c.compile({GrammarKind::json_schema, kToolSchema, {}, false});
    cold.push_back(ms_since(t0));
    cold_cpu.push_back(cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - c0);
    if (!g) return std::fprintf(stderr, "bench_grammar: %s\n", g.error().message.c_str()), 1;
    t0 = std::chrono::steady_clock::now();
    auto again = c.compile({GrammarKind::json_schema, kToolSchema, {}, false});
    cached.push_back(ms_since(t0));
  }
  std::printf("compile tool schema: cold p50 %.3f ms (CPU %.3f ms) max %.3f ms; cached p50 %.4f ms max %.4f ms (%d reps)\n",
              pct(cold, 0.5), pct(cold_cpu, 0.5), pct(cold, 1.0), pct(cached, 0.5), pct(cached, 1.0), reps);

  GrammarCompiler c(*info);
  std::vector<double> fill_us, fill_cpu_us;
  std::vector<uint32_t> mask(size_t((vocab + 31) / 32));
  for (int r = 0; r < reps; ++r) {
    for (const Walk& w : kWalks) {
      auto g = c.compile({GrammarKind::json_schema, w.schema, {}, false});
      if (!g) return std::fprintf(stderr, "bench_grammar: %s\n", g.error().message.c_str()), 1;
      auto prog = std::make_shared<ConstraintProgram>();
      prog->grammar = *g;
      prog->vocab = vocab;
      prog->stop_ids = {(*tok)->eos_id()};
      prog->finish();
      TokenMatcher m(prog);
      for (int32_t id : (*tok)->encode(w.document, false)) {
        t0 = std::chrono::steady_clock::now();
        const double f0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
        m.fill_mask(mask.data());
        fill_cpu_us.push_back((cpu_ms(CLOCK_THREAD_CPUTIME_ID) - f0) * 1000.0);
        fill_us.push_back(ms_since(t0) * 1000.0);
        if (!m.accept(id)) return std::fprintf(stderr, "bench_grammar: the walk left its grammar\n"), 1;
      }
    }
  }
  std::printf("mask fill per sequence step: wall p50 %.1f us, p99 %.1f us, max %.1f us; "
              "CPU p50 %.1f us, p99 %.1f us, max %.1f us over %zu fills\n",
              pct(fill_us, 0.5), pct(fill_us, 0.99), pct(fill_us, 1.0), pct(fill_cpu_us, 0.5),
              pct(fill_cpu_us, 0.99), pct(fill_cpu_us, 1.0), fill_us.size());
  return 0;
}
