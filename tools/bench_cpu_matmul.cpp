#include "bench_cpu_matmul.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <random>

#include "cpu_peaks.hpp"
#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/cpu/quant_packed.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::tools {

namespace {

using namespace pagoda::gpu;
using cpu::QuantIsa;

// Random blocks of a quantized format: fp16 scales in [0.002, 0.03), random quants.
std::vector<uint8_t> random_quant_weight(WeightFormat f, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f);
  const int64_t bsz = block_bytes(f), nb = n * k / block_elems(f);
  std::vector<uint8_t> raw(size_t(nb * bsz));
  for (auto& b : raw) b = uint8_t(byte(rng));
  for (int64_t b = 0; b < nb; ++b) {
    const uint16_t d = fp32_to_fp16(scale(rng)), m = fp32_to_fp16(-scale(rng) * 8);
    std::memcpy(&raw[size_t(b * bsz)], &d, 2);
    if (f == WeightFormat::Q4_1 || f == WeightFormat::Q5_1) std::memcpy(&raw[size_t(b * bsz + 2)], &m, 2);
  }
  return raw;
}

std::vector<QuantIsa> selected(const CpuMatmulOptions& opt) {
  std::vector<QuantIsa> v;
  for (QuantIsa isa : opt.isas.empty() ? std::vector<QuantIsa>(std::begin(cpu::kAllQuantIsas),
                                                               std::end(cpu::kAllQuantIsas))
                                       : opt.isas) {
    if (cpu::quant_isa_supported(isa)) v.push_back(isa);
  }
  return v;
}

// Mean us per call of fn: wall time, or this thread's CPU time.
template <class F>
double time_us(const F& fn, double budget, bool cpu_clock) {
  fn();
  int iters = 0;
  const double c0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  double sec = 0;
  do {
    fn();
    ++iters;
    sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (sec < budget || iters < 3);
  return (cpu_clock ? thread_cpu_seconds() - c0 : sec) / iters * 1e6;
}

}  // namespace

CpuCeilings measure_ceilings(const CpuMatmulOptions& opt) {
  CpuCeilings c;
  cpu::ThreadPool& pool = cpu::ThreadPool::global();
  static cpu::ThreadPool one(1);
  c.read_bytes_per_s = measure_read_bandwidth(pool);
  c.read_bytes_per_cpu_s_1t = measure_read_bandwidth(one, true);
  for (QuantIsa isa : selected(opt)) {
    c.int8_ops_per_s[int(isa)] = measure_int8_peak(isa, pool);
    c.int8_ops_per_cpu_s_1t[int(isa)] = measure_int8_peak(isa, one, true);
  }
  return c;
}

std::string ceilings_json(const CpuCeilings& c) {
  std::string s = "{\"threads\":" + std::to_string(cpu::ThreadPool::global().size()) +
                  ",\"read_buffer_mib\":" + std::to_string(default_bandwidth_bytes() >> 20) +
                  ",\"read_gb_per_s\":" + std::to_string(c.read_bytes_per_s / 1e9) +
                  ",\"read_gb_per_cpu_s_1t\":" + std::to_string(c.read_bytes_per_cpu_s_1t / 1e9);
  for (QuantIsa isa : cpu::kAllQuantIsas) {
    if (c.int8_ops_per_s[int(isa)] > 0) {
      const std::string n(cpu::isa_name(isa));
      s += ",\"int8_gop_per_s_" + n + "\":" + std::to_string(c.int8_ops_per_s[int(isa)] / 1e9) +
           ",\"int8_gop_per_cpu_s_1t_" + n +
           "\":" + std::to_string(c.int8_ops_per_cpu_s_1t[int(isa)] / 1e9);
    }
  }
  return s + "}";
}

CaseTimes cpu_matmul_cases(const char* name, WeightFormat f, int64_t M, int64_t N,
                                     int64_t K, const CpuMatmulOptions& opt,
                                     const CpuCeilings& ceil, std::vector<std::string>& out) {
  const std::vector<uint8_t> raw = random_quant_weight(f, N, K, 7);
  std::vector<uint8_t> packed_bytes;
  const LinearWeight rows{f, N, K, raw.data()};
  const auto packed = cpu::pack_weight(rows, packed_bytes);
  if (!packed) std::exit(1);
  std::vector<float> x(size_t(M * K)), y(size_t(M * N));
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& v : x) v = g(rng);
  cpu::MatmulScratch scratch;
  cpu::ThreadPool& pool = cpu::ThreadPool::global();
  static cpu::ThreadPool one(1);
  CaseTimes times;
  std::vector<LinearWeight> layouts = {*packed};
  if (opt.rows_layout) layouts.insert(layouts.begin(), rows);
  for (const LinearWeight& w : layouts) {
    const bool is_rows = w.layout == WeightLayout::kRows;
    const double wbytes = double(is_rows ? raw.size() : packed_bytes.size());
    const double bytes = wbytes + 4.0 * double(M) * double(K + N);
    double avx2_cpu = 0;
    for (QuantIsa isa : selected(opt)) {
      if (isa == QuantIsa::Scalar && M > 1) continue;  // minutes at M = 512
      auto call = [&](cpu::ThreadPool& p) {
        return [&] {
          if (!cpu::quant_matmul(w, x.data(), y.data(), M, scratch, isa, p)) std::exit(1);
        };
      };
      const double us = time_us(call(pool), opt.seconds_budget, false);
      const double cpu_us = opt.one_thread ? time_us(call(one), opt.seconds_budget, true) : 0;
      if (isa == QuantIsa::Avx2) avx2_cpu = cpu_us;
      if (!is_rows) times.us[int(isa)] = us, times.cpu_us_1t[int(isa)] = cpu_us;
      const double gops = 2.0 * M * N * K / us / 1e3, gbs = bytes / us / 1e3;
      const double peak = ceil.int8_ops_per_s[int(isa)];
      char line[640];
      int n = std::snprintf(
          line, sizeof line,
          "{\"name\":\"%s\",\"format\":\"%s\",\"layout\":\"%s\",\"isa\":\"%s\",\"threads\":%zu,"
          "\"M\":%lld,\"N\":%lld,\"K\":%lld,\"us\":%.1f,\"gop_per_s\":%.1f,\"gb_per_s\":%.2f,"
          "\"bw_fraction\":%.3f,\"peak_fraction\":%.3f",
          name, format_name(f).data(), is_rows ? "rows" : "packed16", cpu::isa_name(isa).data(),
          pool.size(), (long long)M, (long long)N, (long long)K, us, gops, gbs,
          ceil.read_bytes_per_s > 0 ? gbs * 1e9 / ceil.read_bytes_per_s : 0.0,
          peak > 0 ? gops * 1e9 / peak : 0.0);
      if (opt.one_thread) {
        const double cgops = 2.0 * M * N * K / cpu_us / 1e3, cgbs = bytes / cpu_us / 1e3;
        const double cpeak = ceil.int8_ops_per_cpu_s_1t[int(isa)];
        n += std::snprintf(
            line + n, sizeof line - size_t(n),
            ",\"cpu_us_1t\":%.1f,\"gop_per_cpu_s\":%.1f,\"gb_per_cpu_s\":%.2f,"
            "\"bw_fraction_1t\":%.3f,\"peak_fraction_1t\":%.3f,\"cpu_speedup_vs_avx2\":%.3f",
            cpu_us, cgops, cgbs,
            ceil.read_bytes_per_cpu_s_1t > 0 ? cgbs * 1e9 / ceil.read_bytes_per_cpu_s_1t : 0.0,
            cpeak > 0 ? cgops * 1e9 / cpeak : 0.0, avx2_cpu > 0 ? avx2_cpu / cpu_us : 0.0);
      }
      std::snprintf(line + n, sizeof line - size_t(n), "}");
      std::fprintf(stderr, "%s\n", line);
      out.push_back(line);
    }
  }
  return times;
}

namespace {

// A packed random weight (fast fill: a step's 0.6 GB in a few seconds).
struct PackedWeight {
  const char* name;
  std::vector<uint8_t> bytes;
  LinearWeight view;
};

PackedWeight make_packed(const char* name, WeightFormat f, int64_t N, int64_t K, uint64_t seed) {
  const int64_t bsz = block_bytes(f), nb = N * K / block_elems(f);
  std::vector<uint8_t> raw(size_t(nb * bsz));
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i + 8 <= raw.size(); i += 8) {  // splitmix64
    z += 0x9E3779B97F4A7C15ull;
    uint64_t v = z;
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    v ^= v >> 31;
    std::memcpy(&raw[i], &v, 8);
  }
  const WeightTypeTraits& tr = traits(f);
  for (int64_t b = 0; b < nb; ++b) {  // every fp16 field finite (K-quants: d, dmin)
    for (int h = 0; h < tr.half_count; ++h) {
      const uint16_t d = fp32_to_fp16(0.002f + 0.028f * float(raw[size_t(b * bsz + 2 + 2 * h)]) / 255.0f);
      std::memcpy(&raw[size_t(b * bsz + tr.half_at[h])], &d, 2);
    }
  }
  PackedWeight p{name, {}, {}};
  auto v = cpu::pack_weight(LinearWeight{f, N, K, raw.data()}, p.bytes);
  if (!v) std::exit(1);
  p.view = *v;
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

namespace {

// The step's weights in call order: 16 × (qkv, o, gate_up, down), then the output.
constexpr int kShapes = 5, kLayers = 16;
constexpr const char* kNames[kShapes] = {"qkv", "o", "gate_up", "down", "output"};
constexpr int64_t kNK[kShapes][2] = {{3072, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192},
                                     {49152, 2048}};

struct Step {
  std::vector<PackedWeight> ws;  // call order; ws[s] is shape s's first weight (s < 4)
  std::vector<float> x, y;       // [512, 8192], [512, 49152]
  cpu::MatmulScratch scratch;
};

// Median us per step of each shape (summed over layers) and of the whole step.
struct StepTimes {
  double shape_us[kShapes] = {};
  double step_us = 0;
};

StepTimes time_steps(Step& st, int64_t M, QuantIsa isa, cpu::ThreadPool& p, bool cpu_clock) {
  const int reps = M >= 512 ? 1 : 7, first = M >= 512 ? 1 : 0;  // rep 0: warm-up
  std::vector<std::vector<double>> per_shape(kShapes);
  std::vector<double> total;
  for (int r = first; r <= reps; ++r) {
    double sums[kShapes] = {};
    for (const PackedWeight& w : st.ws) {
      const double c0 = thread_cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      if (!cpu::quant_matmul(w.view, st.x.data(), st.y.data(), M, st.scratch, isa, p)) std::exit(1);
      const double sec =
          cpu_clock ? thread_cpu_seconds() - c0
                    : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      sums[std::find_if(kNames, kNames + kShapes, [&](const char* n) { return n == w.name; }) -
           kNames] += sec * 1e6;
    }
    if (r == 0) continue;
    double t = 0;
    for (int s = 0; s < kShapes; ++s) per_shape[size_t(s)].push_back(sums[s]), t += sums[s];
    total.push_back(t);
  }
  StepTimes out;
  for (int s = 0; s < kShapes; ++s) out.shape_us[s] = median(per_shape[size_t(s)]);
  out.step_us = median(total);
  return out;
}

std::string shape_line(const Step& st, int s, WeightFormat f, QuantIsa isa, bool cpu_clock,
                       int64_t M, double us, const CpuCeilings& ceil) {
  const double bw = cpu_clock ? ceil.read_bytes_per_cpu_s_1t : ceil.read_bytes_per_s;
  const double peak = cpu_clock ? ceil.int8_ops_per_cpu_s_1t[int(isa)] : ceil.int8_ops_per_s[int(isa)];
  const double N = double(kNK[s][0]), K = double(kNK[s][1]);
  const double bytes = double(st.ws[s == 4 ? st.ws.size() - 1 : size_t(s)].bytes.size()) +
                       4.0 * double(M) * (N + K);
  const double gops = 2.0 * double(M) * N * K / us / 1e3, gbs = bytes / us / 1e3;
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"name\":\"%s\",\"format\":\"%s\",\"layout\":\"packed16\",\"isa\":\"%s\","
                "\"clock\":\"%s\",\"M\":%lld,\"N\":%lld,\"K\":%lld,\"us\":%.1f,"
                "\"gop_per_s\":%.1f,\"gb_per_s\":%.2f,\"bw_fraction\":%.3f,\"peak_fraction\":%.3f}",
                kNames[s], format_name(f).data(), cpu::isa_name(isa).data(),
                cpu_clock ? "cpu_1t" : "wall", (long long)M, (long long)N, (long long)K, us, gops,
                gbs, bw > 0 ? gbs * 1e9 / bw : 0.0, peak > 0 ? gops * 1e9 / peak : 0.0);
  return line;
}

}  // namespace

void llama1b_cases(WeightFormat f, const CpuMatmulOptions& opt, const CpuCeilings& ceil,
                   std::vector<std::string>& out) {
  Step st;
  for (int l = 0; l < kLayers; ++l) {
    for (int s = 0; s < 4; ++s) {
      st.ws.push_back(make_packed(kNames[s], f, kNK[s][0], kNK[s][1], uint64_t(l * 8 + s)));
    }
  }
  st.ws.push_back(make_packed(kNames[4], f, kNK[4][0], kNK[4][1], 999));
  st.x.resize(size_t(512) * 8192);
  st.y.resize(size_t(512) * 49152);
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& v : st.x) v = g(rng);
  static cpu::ThreadPool one(1);
  auto emit = [&out](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    out.push_back(line);
  };
  std::map<std::pair<int, int64_t>, std::pair<double, double>> steps;  // (isa, M) -> (ms, cpu ms)
  const std::vector<int64_t> Ms = opt.ms.empty() ? std::vector<int64_t>{1, 4, 16, 32, 512} : opt.ms;
  for (int64_t M : Ms) {
    if (M < 1 || M > 512) continue;
    const bool one_thread = opt.one_thread && (M <= 32 || !opt.ms.empty());  // else minutes
    for (QuantIsa isa : selected(opt)) {
      if (isa == QuantIsa::Scalar) continue;
      for (int clock = opt.all_threads ? 0 : 1; clock < (one_thread ? 2 : 1); ++clock) {
        const StepTimes t = time_steps(st, M, isa, clock == 0 ? cpu::ThreadPool::global() : one,
                                       clock == 1);
        for (int s = 0; s < kShapes; ++s) {
          emit(shape_line(st, s, f, isa, clock == 1, M, t.shape_us[s] / (s == 4 ? 1 : kLayers), ceil));
        }
        (clock == 0 ? steps[{int(isa), M}].first : steps[{int(isa), M}].second) = t.step_us / 1e3;
      }
    }
  }
  for (const auto& [key, ms] : steps) {
    const auto it = steps.find({key.first, 1});
    const std::pair<double, double> base = it == steps.end() ? std::pair{0.0, 0.0} : it->second;
    char line[320];
    std::snprintf(line, sizeof line,
                  "{\"name\":\"llama1b_step_matmuls\",\"format\":\"%s\",\"isa\":\"%s\",\"M\":%lld,"
                  "\"ms\":%.2f,\"ratio_to_m1\":%.2f,\"cpu_ms_1t\":%.2f,\"cpu_ratio_to_m1_1t\":%.2f}",
                  format_name(f).data(), cpu::isa_name(QuantIsa(key.first)).data(),
                  (long long)key.second, ms.first, base.first > 0 ? ms.first / base.first : 0.0,
                  ms.second, base.second > 0 ? ms.second / base.second : 0.0);
    emit(line);
  }
}

}  // namespace pagoda::tools
