// The CPU int8 matmul part of bench_kernels (tools/bench_kernels.cpp):
// quant_matmul of given shapes with every selected ISA variant, one JSON line
// per (shape, layout, variant), with time, GOP/s and GB/s put against the
// machine's measured ceilings (tools/cpu_peaks.hpp).
// Thread-safety: single-threaded callers; the kernels use the global pool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/weight_format.hpp"

namespace pagoda::tools {

struct CpuMatmulOptions {
  double seconds_budget = 0.5;              // wall time per timing loop (at least 3 calls)
  std::vector<gpu::cpu::QuantIsa> isas;     // empty: every supported variant
  bool rows_layout = true;                  // also time the file's row layout
  bool one_thread = true;                   // also time on a 1-thread pool (CPU clock)
  bool all_threads = true;                  // time on the global pool (wall clock)
  std::vector<int64_t> ms;                  // llama1b: the M values (empty: 1, 4, 16, 32, 512)
};

// Machine ceilings, measured once: on the global pool (wall clock), and on
// one thread (its CPU time; what a loaded machine disturbs least).
struct CpuCeilings {
  double read_bytes_per_s = 0, read_bytes_per_cpu_s_1t = 0;
  double int8_ops_per_s[5] = {};         // indexed by QuantIsa
  double int8_ops_per_cpu_s_1t[5] = {};  // indexed by QuantIsa
};
CpuCeilings measure_ceilings(const CpuMatmulOptions& opt);
std::string ceilings_json(const CpuCeilings& c);

// One shape: lines appended to out (and printed on stderr). Each line:
// us (wall, global pool), gop_per_s (2·M·N·K / us), gb_per_s (weight bytes
// in that layout + x + y per second), bw_fraction, peak_fraction (of the
// variant's int8 peak); with opt.one_thread also cpu_us_1t and the ratio to
// the avx2 variant, and the same GB/s and fractions against the 1-thread
// ceilings. Returns {wall us, 1-thread CPU us} per variant, packed layout
// (indexed by QuantIsa; 0 where not run).
struct CaseTimes {
  double us[5] = {}, cpu_us_1t[5] = {};
};
CaseTimes cpu_matmul_cases(const char* name, gpu::WeightFormat f, int64_t M, int64_t N,
                                     int64_t K, const CpuMatmulOptions& opt,
                                     const CpuCeilings& ceil, std::vector<std::string>& out);

// The matmuls of one Llama-3.2-1B step (hidden 2048, 32 heads / 8 KV heads
// of 64, FFN 8192, tied 49152 x 2048 output as in tools/gen-dummy-gguf.py):
// 16 layers of distinct random weights (qkv, o, gate_up, down; ~0.6 GB in
// Q4_0, so they stream from memory as in a real step, not from the caches)
// then the output, in `f`, packed, at M = 1, 4, 16, 32, 512 rows. Each step
// is run 7 times after a warm-up (M = 512: once), on all threads (wall
// clock) and, with opt.one_thread and M <= 32, on one thread (its CPU time). Lines: per shape
// the median us per call with GB/s, GOP/s and their fractions of the
// ceilings; per (variant, M) the step's median ms and its ratio to M = 1.
void llama1b_cases(gpu::WeightFormat f, const CpuMatmulOptions& opt, const CpuCeilings& ceil,
                   std::vector<std::string>& out);

}  // namespace pagoda::tools
