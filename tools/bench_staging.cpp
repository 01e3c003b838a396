// bench_staging: the executor's own host preparation per step, the part a
// pipelined executor would prepare while the step before computes. Drives an
// Executor directly (no actors) with C sequences on the CPU backend: one
// prefill step, then --steps decode steps with one placeholder each (as
// scheduling ahead plans them). Per decode step: prep = Executor::
// last_prep_ns (mirror deltas, placeholder patch, table sync, copies, the
// flattened batch; not RunState's packing, which runs inside the forward),
// compute = last_compute_ns (forward + sampling, with RunState's packing),
// run = the whole run() call, host = run - compute (all of the step's host
// work outside the device calls: prep, the result's record, the rest).
// Prints one JSON object: per C the medians and p90 in microseconds.
//
//   bench_staging [--tiny DIR | --model PATH] [--concurrency 1,16,64]
//                 [--prompt 32] [--steps 64] [--threads 0]
//   --tiny (default model/configs/tiny): random f32 weights of that config
//   (small compute, so host work shows); --model: a GGUF, quantized.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "actors/executor.hpp"

namespace {

using namespace pagoda::actors;

struct Args {
  std::string tiny = "model/configs/tiny", model;
  std::vector<int32_t> concurrency = {1, 16, 64};
  int32_t prompt = 32, steps = 64;
  size_t threads = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--tiny") {
      a.tiny = v;
    } else if (k == "--model") {
      a.model = v;
    } else if (k == "--concurrency") {
      a.concurrency.clear();
      std::stringstream ss(v);
      for (std::string part; std::getline(ss, part, ',');) a.concurrency.push_back(std::stoi(part));
    } else if (k == "--prompt") {
      a.prompt = std::stoi(v);
    } else if (k == "--steps") {
      a.steps = std::stoi(v);
    } else if (k == "--threads") {
      a.threads = size_t(std::stoul(v));
    } else {
      std::fprintf(stderr, "bench_staging: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

PlanSample greedy(SeqId seq, int32_t entry) {
  PlanSample s;
  s.seq = seq;
  s.entry = entry;
  s.params.temperature = 0.0f;
  return s;
}

struct Times {
  std::vector<double> prep, compute, run, host;
};

// C sequences of `prompt` tokens, each in its own run of blocks, then decodes.
bool run_case(Executor& ex, const Args& a, int32_t c, Times& t) {
  const int32_t bs = ex.block_size();
  const int32_t per_seq = (a.prompt + a.steps + bs - 1) / bs;
  StepPlan p;
  p.step_id = 1;
  for (int32_t s = 0; s < c; ++s) {
    PlanEntry e;
    e.seq = SeqId(s + 1);
    for (int32_t i = 0; i < a.prompt; ++i) e.tokens.push_back(100 + (i * 37 + s * 101) % 5000);
    e.fresh = true;
    e.prompt_len = a.prompt;
    for (int32_t b = 0; b < per_seq; ++b) e.new_blocks.push_back(s * per_seq + b);
    p.entries.push_back(e);
    p.samples.push_back(greedy(e.seq, s));
  }
  if (auto r = ex.run(p); !r || !r->errors.empty()) return false;
  for (int32_t k = 0; k < a.steps; ++k) {
    StepPlan d;
    d.step_id = uint64_t(k + 2);
    d.depends_on = uint64_t(k + 1);
    for (int32_t s = 0; s < c; ++s) {
      PlanEntry e;
      e.seq = SeqId(s + 1);
      e.num_cached = a.prompt + k;
      e.table_from = per_seq;
      e.num_placeholders = 1;
      d.entries.push_back(e);
      d.samples.push_back(greedy(e.seq, s));
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto r = ex.run(d);
    const double run_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!r || !r->errors.empty()) return false;
    t.prep.push_back(double(ex.last_prep_ns()) * 1e-3);
    t.compute.push_back(double(ex.last_compute_ns()) * 1e-3);
    t.run.push_back(run_us);
    t.host.push_back(run_us - t.compute.back());
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::printf("{\"model\": \"%s\", \"prompt\": %d, \"steps\": %d, \"rows\": [",
              a.model.empty() ? a.tiny.c_str() : a.model.c_str(), a.prompt, a.steps);
  bool first = true;
  for (int32_t c : a.concurrency) {
    ExecutorOptions o;
    o.backend = pagoda::gpu::BackendKind::kCpu;
    o.cpu_threads = a.threads;
    if (a.model.empty()) {
      o.model_path = a.tiny;
      o.load_format = pagoda::model::LoadFormat::kDummy;
      o.precision = pagoda::model::WeightPrecision::kExact;
    } else {
      o.model_path = a.model;
    }
    o.block_size = 16;
    o.max_num_seqs = c;
    o.max_num_batched_tokens = std::max(c * a.prompt, 64);
    o.max_model_len = a.prompt + a.steps + 16;
    o.num_blocks = c * ((a.prompt + a.steps + 15) / 16) + 1;
    auto ex = Executor::create(o);
    if (!ex) {
      std::fprintf(stderr, "bench_staging: %s\n", ex.error().message.c_str());
      return 1;
    }
    Times t;
    if (!run_case(**ex, a, c, t)) {
      std::fprintf(stderr, "bench_staging: a step failed at C = %d\n", c);
      return 1;
    }
    std::printf("%s\n  {\"C\": %d, \"prep_us_p50\": %.1f, \"prep_us_p90\": %.1f, "
                "\"host_us_p50\": %.1f, \"host_us_p90\": %.1f, \"compute_us_p50\": %.1f, "
                "\"run_us_p50\": %.1f}",
                first ? "" : ",", c, pct(t.prep, 0.5), pct(t.prep, 0.9), pct(t.host, 0.5),
                pct(t.host, 0.9), pct(t.compute, 0.5), pct(t.run, 0.5));
    first = false;
  }
  std::printf("\n]}\n");
  return 0;
}
