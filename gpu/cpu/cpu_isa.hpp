// Run-time CPU feature detection for the SIMD kernels of gpu/cpu.
//
// A feature counts only when the CPU reports it (cpuid) AND the OS saves and
// restores its register state (xgetbv XCR0: bits 1-2 for SSE/AVX, bits 5-7
// for the AVX-512 opmask and zmm state). AMX is reported for information
// only: its tile state must be granted per process (arch_prctl
// ARCH_REQ_XCOMP_PERM); Pagoda has no AMX kernel and never asks for it.
//
// The int8 kernels of quant_matmul come in variants (QuantIsa); the process
// uses best_quant_isa(): the env var PAGODA_CPU_ISA (scalar | avx2 | avxvnni |
// avx512bw | avx512vnni) when set and supported, else the fastest supported
// variant. avx512bw is the 512-bit variant without vpdpbusd (Skylake-class
// Xeons: AVX-512 F/BW/VL/DQ, no VNNI); it is chosen on such CPUs.
// Thread-safety: everything here is computed once and read-only after.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda::gpu::cpu {

struct CpuFeatures {
  bool avx2 = false;        // AVX2 + FMA + F16C, OS-enabled ymm state
  bool avx_vnni = false;    // VEX vpdpbusd (needs the avx2 set too)
  bool avx512 = false;      // F + BW + VL (+ DQ), OS-enabled zmm/opmask state
  bool avx512_vnni = false; // EVEX vpdpbusd (needs avx512)
  bool amx_cpuid = false;   // AMX-TILE in cpuid (never used)
  bool amx_granted = false; // the process may use AMX tile data (arch_prctl)
  std::string describe() const;  // e.g. "avx2 avx512 avx512_vnni avx_vnni; amx: absent"
};

// Detected once (cpuid + xgetbv) and cached.
const CpuFeatures& cpu_features();

// Variants of the int8 dot-product kernels, slowest first.
enum class QuantIsa { Scalar, Avx2, AvxVnni, Avx512Bw, Avx512Vnni };
inline constexpr QuantIsa kAllQuantIsas[] = {QuantIsa::Scalar, QuantIsa::Avx2, QuantIsa::AvxVnni,
                                             QuantIsa::Avx512Bw, QuantIsa::Avx512Vnni};

// "scalar", "avx2", "avxvnni", "avx512bw", "avx512vnni"
std::string_view isa_name(QuantIsa isa);
bool parse_isa(std::string_view name, QuantIsa& out);

// True when this CPU and OS can run the variant.
bool quant_isa_supported(QuantIsa isa);
// Why a variant cannot run here ("" when it can).
std::string quant_isa_unsupported_reason(QuantIsa isa);

// The variant every matmul uses: PAGODA_CPU_ISA when set (an unknown or
// unsupported value falls back to the best one, with a message on stderr),
// else the fastest supported one. Computed once.
QuantIsa best_quant_isa();

// The rule best_quant_isa applies, for a given PAGODA_CPU_ISA value
// (nullptr: unset): the forced variant when valid and supported, else the
// fastest supported one; *why (optional) says which case applied.
QuantIsa choose_quant_isa(const char* env_value, std::string* why = nullptr);

// One line for start-up logs: chosen variant, why, and the CPU's features.
std::string cpu_isa_summary();

// The rule of every kernel family's override (choose_quant_isa,
// choose_attn_isa): `all` lists the variants slowest first; the fastest one
// with lacks(v) == "" wins unless env_value (the value of variable `var`;
// nullptr or "": unset) names a supported variant. *why (optional) says
// which case applied: "best supported", "forced by VAR", or why the
// override was ignored ("... is not a, b or c", or what the CPU lacks).
template <class Isa, size_t N, class Name, class Lacks>
Isa choose_variant(const Isa (&all)[N], const char* var, const char* env_value, Name name,
                   Lacks lacks, std::string* why) {
  Isa chosen = all[0];
  for (Isa v : all) {
    if (lacks(v).empty()) chosen = v;
  }
  std::string reason = "best supported";
  if (env_value != nullptr && *env_value != '\0') {
    const std::string prefix = "best supported; " + std::string(var) + "=" + env_value;
    std::string names;
    for (size_t i = 0; i < N; ++i) {
      names += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(name(all[i]));
    }
    reason = prefix + " is not " + names;
    for (Isa v : all) {
      if (std::string_view(env_value) != std::string_view(name(v))) continue;
      const std::string missing = lacks(v);
      reason = missing.empty() ? "forced by " + std::string(var) : prefix + ": " + missing;
      if (missing.empty()) chosen = v;
    }
  }
  if (why != nullptr) *why = reason;
  return chosen;
}

}  // namespace pagoda::gpu::cpu
