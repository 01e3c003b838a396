// bench_kernels: throughput of the compute kernels, printed as JSON.
//  - paged attention decode (one query row per sequence), BF16 cache on CUDA
//    (F32 on the CPU backend): achieved bandwidth = bytes of K/V read + q
//    read + out written per second, and its fraction of the device's peak
//    (2 x memory clock x bus width, from cudaDeviceGetAttribute);
//  - prefill attention (CUDA): the tiled tensor-core kernel and the row
//    kernel on a 2048-token prompt and a 512-token chunk over 3584 cached
//    tokens, Llama-3-8B heads: TFLOP/s;
//  - sampling (top_k/top_p rows over a 49152 vocabulary): time per call;
//  - matmul (BF16 weights; M <= 8 is the GEMV kernel, larger M cuBLAS): TFLOP/s;
//  - decode GEMV at Llama-3-8B shapes, M = 1, 2, 4, 8 (and 16 on cuBLAS): GB/s
//    against the measured device-to-device copy bandwidth and the peak
//    (tools/bench_gemv.hpp); --gemv runs only this (and the copy);
//  - CPU quantized matmul (the int8 kernels, every ISA variant this CPU
//    supports side by side, on SmolLM2-135M's shapes: Q4_1 layers, the Q8_0
//    49152 x 576 output matrix) at M = 1, 32, 512: us per call, GOP/s
//    (2·M·N·K / time) and GB/s against the machine's measured read bandwidth
//    and each variant's measured int8 peak (tools/bench_cpu_matmul.hpp,
//    tools/cpu_peaks.hpp), and the ratio to the avx2 variant. --llama1b:
//    instead Llama-3.2-1B's shapes (Q4_0, or --format q8_0|q4_1|q5_0|q5_1|
//    iq4_nl|iq4_xs|q2_k|q3_k|q4_k|q5_k|q6_k) at M = 1, 4, 16, 32, 512 (or --m) in the packed layout, with the matmul time of a whole
//    decode step per M, on all threads and on one thread (CPU time; only
//    that with --one-thread-only); --isa a,b limits the variants.
// CUDA timings use events on the backend's stream (3 warm-up calls, then the
// mean of N); CPU timings use steady_clock. Without a device only the CPU
// part runs; builds without CUDA have only the CPU part.
// Usage: bench_kernels [--json FILE] [--quick] [--cpu-matmul-only] [--gemv] [--cpu-attention]
//                      [--llama1b [--format q4_0|q8_0|q4_1|q5_0|q5_1|iq4_nl|iq4_xs|q2_k..q6_k]
//                                 [--m 1,16,...] [--one-thread-only]]
//                      [--isa NAME[,NAME...]] [--ceilings-only]
//    --ceilings-only: only the measured ceilings (read bandwidth, int8 peaks
//    on the pool's threads and on one), one JSON object on stdout.
#if PAGODA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_cpu_matmul.hpp"
#include "bench_gemv.hpp"
#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/cpu/quant_packed.hpp"
#include "gpu/cpu/thread_pool.hpp"
#if PAGODA_HAVE_CUDA
#include "gpu/cuda/cuda_backend.hpp"
#endif
#include "gpu/device.hpp"
#include "gpu/quant_format.hpp"

namespace {

using namespace pagoda::gpu;
using pagoda::Result;

struct AttnShape {
  const char* name;
  int seqs, ctx, Hq, Hk, D, BS;
};

// Mean seconds per call of fn: CUDA events on the backend's stream, or the
// host clock for the CPU backend (whose calls are synchronous).
double time_calls(Backend& be, int iters, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  be.synchronize();
#if PAGODA_HAVE_CUDA
  if (be.kind() == BackendKind::kCuda) {
    auto& cuda_be = static_cast<cuda::CudaBackend&>(be);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, cuda_be.stream());
    for (int i = 0; i < iters; ++i) fn();
    cudaEventRecord(stop, cuda_be.stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms / 1e3 / iters;
  }
#endif
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

DeviceBuffer must(Result<DeviceBuffer> r) {
  if (!r) {
    std::fprintf(stderr, "bench_kernels: %s\n", r.error().message.c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

// Fills buf with `bytes` of a repeated random pattern of small finite values.
void fill(Backend& be, DeviceBuffer& buf, KvDtype dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint8_t> chunk(size_t{1} << 20);
  for (size_t i = 0; i < chunk.size(); i += 4) {
    const float x = u(rng);
    if (dtype == KvDtype::kF32) {
      std::memcpy(&chunk[i], &x, 4);
    } else {
      const uint16_t h[2] = {fp32_to_bf16(x), fp32_to_bf16(-x * 0.5f)};
      std::memcpy(&chunk[i], h, 4);
    }
  }
  for (size_t at = 0; at < buf.size(); at += chunk.size()) {
    const size_t n = std::min(chunk.size(), buf.size() - at);
    if (!be.upload(buf, at, chunk.data(), n)) std::exit(1);
  }
}

template <class T>
DeviceBuffer put(Backend& be, const std::vector<T>& v) {
  DeviceBuffer b = must(be.allocate(v.size() * sizeof(T)));
  if (!v.empty() && !be.upload(b, 0, v.data(), v.size() * sizeof(T))) std::exit(1);
  return b;
}

std::string attention_case(Backend& be, const AttnShape& s, KvDtype dtype, int partition,
                           double peak_bps, int iters) {
  const int blocks_per_seq = (s.ctx + s.BS - 1) / s.BS;
  const int64_t num_blocks = int64_t{s.seqs} * blocks_per_seq;
  const KvCacheLayout L{s.Hk, s.D, s.BS, num_blocks};
  const size_t cache_bytes = size_t(L.layer_elements() * kv_dtype_bytes(dtype));
  DeviceBuffer kc = must(be.allocate(cache_bytes)), vc = must(be.allocate(cache_bytes));
  fill(be, kc, dtype, 1);
  fill(be, vc, dtype, 2);
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  std::vector<int32_t> qsl(size_t(s.seqs) + 1), ctx(size_t(s.seqs), s.ctx);
  std::iota(qsl.begin(), qsl.end(), 0);
  std::vector<float> q(size_t(s.seqs) * s.Hq * s.D, 0.1f);
  DeviceBuffer qb = put(be, q), ob = put(be, q), tb = put(be, ids), sb = put(be, qsl),
               cb = put(be, ctx);
  PagedAttentionParams a;
  a.q = qb.as<const float>();
  a.q_stride = int64_t{s.Hq} * s.D;
  a.out = ob.as<float>();
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  a.layout = L;
  a.dtype = dtype;
  a.num_q_heads = s.Hq;
  a.scale = 1.0f / std::sqrt(float(s.D));
  a.partition_size = partition;
  a.meta = {s.seqs, s.seqs, sb.as<const int32_t>(), cb.as<const int32_t>(),
            tb.as<const int32_t>(), blocks_per_seq, s.ctx};
  const double sec = time_calls(be, iters, [&] { be.paged_attention(a); });
  const double bytes = 2.0 * double(s.seqs) * s.ctx * s.Hk * s.D * double(kv_dtype_bytes(dtype)) +
                       2.0 * double(q.size()) * 4;
  const double gbps = bytes / sec / 1e9;
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"name\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\",\"seqs\":%d,\"ctx\":%d,\"Hq\":%d,\"Hk\":%d,"
                "\"D\":%d,\"block\":%d,\"partition\":%d,\"us\":%.2f,\"gb_per_s\":%.1f,"
                "\"peak_fraction\":%.3f}",
                s.name, be.kind() == BackendKind::kCuda ? "cuda" : "cpu",
                dtype == KvDtype::kF32 ? "f32" : "bf16", s.seqs, s.ctx, s.Hq,
                s.Hk, s.D, s.BS, partition, sec * 1e6, gbps,
                peak_bps > 0 ? bytes / sec / peak_bps : 0.0);
  std::fprintf(stderr, "%s\n", line);
  return line;
}

#if PAGODA_HAVE_CUDA
// Prefill attention of one sequence: q_len new rows over ctx - q_len cached
// keys (causal), Llama-3-8B heads, through a backend whose options pick the
// kernel (tiled tensor-core or row kernel). TFLOP/s counts QK^T and PV over
// the keys each row attends: 4 * D * Hq * sum_i (ctx - q_len + i + 1).
std::string prefill_case(Backend& be, const char* kernel, int ctx, int q_len, int iters) {
  const AttnShape s{"prefill", 1, ctx, 32, 8, 128, 16};
  const int blocks = (ctx + s.BS - 1) / s.BS;
  const KvCacheLayout L{s.Hk, s.D, s.BS, blocks};
  const size_t cache_bytes = size_t(L.layer_elements() * 2);
  DeviceBuffer kc = must(be.allocate(cache_bytes)), vc = must(be.allocate(cache_bytes));
  fill(be, kc, KvDtype::kBF16, 1);
  fill(be, vc, KvDtype::kBF16, 2);
  std::vector<int32_t> ids(static_cast<size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  const std::vector<int32_t> qsl = {0, q_len}, ctxs = {ctx};
  std::vector<float> q(size_t(q_len) * s.Hq * s.D, 0.1f);
  DeviceBuffer qb = put(be, q), ob = put(be, q), tb = put(be, ids), sb = put(be, qsl),
               cb = put(be, ctxs);
  PagedAttentionParams a;
  a.q = qb.as<const float>();
  a.q_stride = int64_t{s.Hq} * s.D;
  a.out = ob.as<float>();
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  a.layout = L;
  a.dtype = KvDtype::kBF16;
  a.num_q_heads = s.Hq;
  a.scale = 1.0f / std::sqrt(float(s.D));
  a.partition_size = 0;
  a.meta = {q_len, 1, sb.as<const int32_t>(), cb.as<const int32_t>(), tb.as<const int32_t>(),
            blocks, ctx};
  a.meta.max_query_len = q_len;
  const double sec = time_calls(be, iters, [&] { be.paged_attention(a); });
  const double keys = double(q_len) * (ctx - q_len) + double(q_len) * (q_len + 1) / 2;
  const double tflops = 4.0 * s.D * s.Hq * keys / sec / 1e12;
  char line[256];
  std::snprintf(line, sizeof line,
                "{\"kernel\":\"%s\",\"ctx\":%d,\"q_len\":%d,\"Hq\":32,\"Hk\":8,\"D\":128,"
                "\"us\":%.2f,\"tflop_per_s\":%.2f}",
                kernel, ctx, q_len, sec * 1e6, tflops);
  std::fprintf(stderr, "%s\n", line);
  return line;
}
#endif

std::string sampling_case(Backend& be, int rows, int vocab, int iters) {
  std::vector<float> logits(size_t(rows) * vocab);
  std::mt19937 rng(4);
  std::normal_distribution<float> n(0.0f, 3.0f);
  for (auto& x : logits) x = n(rng);
  std::vector<SamplingRowParams> rp(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    rp[size_t(r)].temperature = 0.8f;
    rp[size_t(r)].top_k = 50;
    rp[size_t(r)].top_p = 0.9f;
    rp[size_t(r)].seed = uint64_t(r);
  }
  DeviceBuffer lb = put(be, logits), rb = put(be, rp), hb = put(be, std::vector<int32_t>{0}),
               tb = put(be, std::vector<int32_t>(size_t(rows))),
               pb = put(be, std::vector<float>(size_t(rows)));
  SamplingParams p;
  p.logits = lb.as<const float>();
  p.rows = rb.as<const SamplingRowParams>();
  p.history = hb.as<const int32_t>();
  p.num_rows = rows;
  p.vocab_size = vocab;
  p.tokens = tb.as<int32_t>();
  p.logprobs = pb.as<float>();
  const double sec = time_calls(be, iters, [&] { be.sample(p); });
  char line[256];
  std::snprintf(line, sizeof line,
                "{\"backend\":\"%s\",\"rows\":%d,\"vocab\":%d,\"top_k\":50,\"top_p\":0.9,"
                "\"us\":%.1f}",
                be.kind() == BackendKind::kCuda ? "cuda" : "cpu", rows, vocab, sec * 1e6);
  std::fprintf(stderr, "%s\n", line);
  return line;
}

#if PAGODA_HAVE_CUDA
std::string matmul_case(cuda::CudaBackend& be, int64_t M, int64_t N, int64_t K, int iters) {
  std::vector<uint16_t> w(size_t(N * K), fp32_to_bf16(0.01f));
  auto dw = be.prepare_weight(LinearWeight{WeightFormat::BF16, N, K, w.data()});
  if (!dw) std::exit(1);
  DeviceBuffer xb = put(be, std::vector<float>(size_t(M * K), 0.5f)),
               yb = put(be, std::vector<float>(size_t(M * N)));
  MatmulParams p{xb.as<const float>(), K, dw->weight, nullptr, yb.as<float>(), M};
  const double sec = time_calls(be, iters, [&] {
    if (!be.matmul(p)) std::exit(1);
  });
  char line[256];
  std::snprintf(line, sizeof line,
                "{\"M\":%lld,\"N\":%lld,\"K\":%lld,\"us\":%.2f,\"tflop_per_s\":%.2f,"
                "\"weight_gb_per_s\":%.1f}",
                (long long)M, (long long)N, (long long)K, sec * 1e6, 2.0 * M * N * K / sec / 1e12,
                double(N * K * 2) / sec / 1e9);
  std::fprintf(stderr, "%s\n", line);
  return line;
}
#endif

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += (c == '\n' ? ' ' : c);
  }
  return o;
}

std::string join(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ",\n    " : "\n    ") + v[i];
  return s + (v.empty() ? "]" : "\n  ]");
}

// --cpu-attention: decode attention on the CPU backend at 4k-token contexts
// (Llama-3.2-1B's heads: 32 q, 8 kv, D 64; one and four sequences), fp32
// and bf16 caches; one JSON line per case on stdout.
int cpu_attention_cases(bool quick) {
  auto cpu = std::move(make_backend(BackendKind::kCpu)).value();
  const AttnShape shapes[] = {{"llama1b-4k", 1, 4096, 32, 8, 64, 16},
                              {"llama1b-4k", 4, 4096, 32, 8, 64, 16},
                              {"llama1b-512", 16, 512, 32, 8, 64, 16}};
  for (const AttnShape& s : shapes) {
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
      std::printf("%s\n", attention_case(*cpu, s, dtype, 0, 0, quick ? 5 : 20).c_str());
    }
  }
  return 0;
}

// The formats --format takes, by their names in lower case.
constexpr WeightFormat kBenchFormats[] = {
    WeightFormat::Q4_0, WeightFormat::Q8_0,   WeightFormat::Q4_1,   WeightFormat::Q5_0,
    WeightFormat::Q5_1, WeightFormat::IQ4_NL, WeightFormat::IQ4_XS, WeightFormat::Q2_K,
    WeightFormat::Q3_K, WeightFormat::Q4_K,   WeightFormat::Q5_K,   WeightFormat::Q6_K};

std::string lower_name(WeightFormat f) {
  std::string s(pagoda::gpu::format_name(f));
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// --format's value, or nullopt.
std::optional<WeightFormat> parse_format(const std::string& name) {
  for (WeightFormat f : kBenchFormats) {
    if (name == lower_name(f)) return f;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false, cpu_matmul_only = false, llama1b = false, gemv_only = false;
  bool ceilings_only = false, cpu_attention_only = false;
  pagoda::tools::CpuMatmulOptions opt;
  WeightFormat llama_format = WeightFormat::Q4_0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--cpu-attention")) cpu_attention_only = true;
    if (!std::strcmp(argv[i], "--cpu-matmul-only")) cpu_matmul_only = true;
    if (!std::strcmp(argv[i], "--gemv")) gemv_only = true;
    if (!std::strcmp(argv[i], "--ceilings-only")) ceilings_only = cpu_matmul_only = true;
    if (!std::strcmp(argv[i], "--llama1b")) llama1b = cpu_matmul_only = true;
    if (!std::strcmp(argv[i], "--format") && i + 1 < argc) {
      const std::string name = argv[++i];
      const std::optional<WeightFormat> f = parse_format(name);
      if (!f) {  // one format per run; a typo or a list is an error, not Q4_0
        std::string names;
        for (WeightFormat k : kBenchFormats) names += " " + lower_name(k);
        std::fprintf(stderr, "bench_kernels: --format %s: not one of%s\n", name.c_str(), names.c_str());
        return 2;
      }
      llama_format = *f;
    }
    if (!std::strcmp(argv[i], "--m") && i + 1 < argc) {
      for (const char* at = argv[++i]; *at != '\0';) {
        char* end = nullptr;
        opt.ms.push_back(std::strtoll(at, &end, 10));
        at = *end == ',' ? end + 1 : end;
        if (end == at && *at != '\0') break;
      }
    }
    if (!std::strcmp(argv[i], "--one-thread-only")) opt.all_threads = false;
    if (!std::strcmp(argv[i], "--isa") && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        cpu::QuantIsa isa;
        if (!cpu::parse_isa(list.substr(at, end - at), isa)) {
          std::fprintf(stderr, "bench_kernels: unknown --isa %s\n", list.substr(at, end - at).c_str());
          return 2;
        }
        opt.isas.push_back(isa);
        at = end + 1;
      }
    }
  }
  std::fprintf(stderr, "bench_kernels: %s\n", cpu::cpu_isa_summary().c_str());
  if (cpu_attention_only) return cpu_attention_cases(quick);
  std::vector<std::string> attn, prefill, sampling, matmul, cpu_matmul, gemv;
  std::string device = "none", reason;
  double peak_bps = 0, copy_bps = 0;
  const DeviceInfo info = cpu_matmul_only ? DeviceInfo{} : probe_devices();
#if PAGODA_HAVE_CUDA
  if (info.device_count > 0) {
    auto made = cuda::CudaBackend::create(BackendOptions{});
    if (!made) {
      reason = made.error().message;
    } else {
      cuda::CudaBackend& gpu = **made;
      int clock_khz = 0, bus_bits = 0;
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
      peak_bps = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
      device = std::string(gpu.name());
      const int iters = quick ? 5 : 20;
      copy_bps = pagoda::tools::measure_copy_bandwidth(gpu, iters);
      std::fprintf(stderr, "{\"device_copy_gb_per_s\":%.1f,\"peak_gb_per_s\":%.1f}\n",
                   copy_bps / 1e9, peak_bps / 1e9);
      if (auto ok = pagoda::tools::gemv_cases(gpu, copy_bps, peak_bps, quick ? 10 : 50, gemv);
          !ok) {
        reason = "gemv: " + ok.error().message;
      }
    }
  }
  if (info.device_count > 0 && reason.empty() && !gemv_only) {
    auto made = cuda::CudaBackend::create(BackendOptions{});
    if (!made) {
      reason = made.error().message;
    } else {
      cuda::CudaBackend& gpu = **made;
      const int iters = quick ? 5 : 20;
      const AttnShape shapes[] = {{"llama8b-like", 64, 2048, 32, 8, 128, 16},
                                  {"smollm2-like", 64, 2048, 9, 3, 64, 16},
                                  {"long-few", 4, 16384, 32, 8, 128, 16}};
      for (const AttnShape& s : shapes) {
        for (int P : {0, -1, 512}) {
          attn.push_back(attention_case(gpu, s, KvDtype::kBF16, P, peak_bps, iters));
        }
      }
      // The tiled prefill kernel (skipped when the environment turned it off)
      // against the row kernel, on the whole-prompt and chunked cases.
      BackendOptions row_opts;
      row_opts.tiled_prefill = false;
      auto rowwise = cuda::CudaBackend::create(row_opts);
      for (auto [ctx, q_len] : {std::pair{2048, 2048}, std::pair{4096, 512}}) {
        if (!step_feature_env().rowwise_prefill) {
          prefill.push_back(prefill_case(gpu, "fa2", ctx, q_len, iters));
        }
        if (rowwise) prefill.push_back(prefill_case(**rowwise, "rowwise", ctx, q_len, iters));
      }
      if (rowwise) {
        if (auto ok = (*rowwise)->check(); !ok) reason = ok.error().message;
      }
      sampling.push_back(sampling_case(gpu, 64, 49152, iters));
      for (int64_t M : {1, 64, 512}) matmul.push_back(matmul_case(gpu, M, 1536, 576, iters));
      // Llama-3-8B's projections (fused qkv, o, fused gate_up, down), M = 1 ... 256
      // (M <= 8 takes the decode GEMV while it is on, as in a step).
      for (auto [N, K] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096},
                          {4096, 14336}}) {
        for (int64_t M : {1, 8, 16, 32, 64, 128, 256}) {
          matmul.push_back(matmul_case(gpu, M, N, K, iters));
        }
      }
      if (auto ok = gpu.check(); !ok) reason = ok.error().message;
    }
  } else {
    reason = info.reason;
  }
#else
  reason = cpu_matmul_only ? "" : "built without CUDA";
#endif
  auto cpu = std::move(make_backend(BackendKind::kCpu)).value();
  if (!cpu_matmul_only && !gemv_only) {
    const AttnShape cpu_shapes[] = {{"llama8b-like", 8, 512, 32, 8, 128, 16},
                                    {"smollm2-like", 8, 512, 9, 3, 64, 16}};
    for (const AttnShape& s : cpu_shapes) {
      attn.push_back(attention_case(*cpu, s, KvDtype::kF32, 0, 0, quick ? 2 : 5));
    }
    sampling.push_back(sampling_case(*cpu, 8, 49152, quick ? 2 : 5));
  }
  opt.seconds_budget = quick ? 0.1 : 0.5;
  const pagoda::tools::CpuCeilings ceil =
      gemv_only ? pagoda::tools::CpuCeilings{} : pagoda::tools::measure_ceilings(opt);
  const std::string ceilings = pagoda::tools::ceilings_json(ceil);
  if (ceilings_only) {
    std::printf("%s\n", ceilings.c_str());
    return 0;
  }
  if (!gemv_only) std::fprintf(stderr, "cpu ceilings: %s\n", ceilings.c_str());
  if (gemv_only) {
  } else if (llama1b) {
    opt.rows_layout = false;
    pagoda::tools::llama1b_cases(llama_format, opt, ceil, cpu_matmul);
  } else {
    for (int64_t M : {1, 32, 512}) {
      using pagoda::tools::cpu_matmul_cases;
      cpu_matmul_cases("qkv", WeightFormat::Q4_1, M, 960, 576, opt, ceil, cpu_matmul);
      cpu_matmul_cases("gate_up", WeightFormat::Q4_1, M, 3072, 576, opt, ceil, cpu_matmul);
      cpu_matmul_cases("down", WeightFormat::Q4_1, M, 576, 1536, opt, ceil, cpu_matmul);
      cpu_matmul_cases("output", WeightFormat::Q8_0, M, 49152, 576, opt, ceil, cpu_matmul);
    }
  }
  std::string out = "{\n  \"device\": \"" + escape(device) + "\",\n  \"note\": \"" +
                    escape(reason) +
                    "\",\n  \"peak_gb_per_s\": " + std::to_string(peak_bps / 1e9) +
                    ",\n  \"copy_gb_per_s\": " + std::to_string(copy_bps / 1e9) +
                    ",\n  \"gemv\": " + join(gemv) +
                    ",\n  \"attention\": " + join(attn) + ",\n  \"prefill\": " + join(prefill) +
                    ",\n  \"sampling\": " +
                    join(sampling) + ",\n  \"matmul\": " + join(matmul) +
                    ",\n  \"cpu_ceilings\": " + ceilings +
                    ",\n  \"cpu_quant_matmul\": " + join(cpu_matmul) + "\n}\n";
  std::fputs(out.c_str(), stdout);
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f != nullptr) {
      std::fputs(out.c_str(), f);
      std::fclose(f);
    }
  }
  return reason.empty() || info.device_count == 0 ? 0 : 1;
}
