#include "gpu/cpu/cpu_isa.hpp"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pagoda::gpu::cpu {

namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

// XCR0 through xgetbv; only valid when cpuid reports OSXSAVE.
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

// Whether the kernel lets this process use AMX tile data, asked without
// requesting it (ARCH_GET_XCOMP_PERM = 0x1022, XTILEDATA = feature 18).
bool amx_permitted() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  unsigned long mask = 0;
  if (syscall(SYS_arch_prctl, 0x1022, &mask) != 0) return false;
  return (mask >> 18) & 1u;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27), fma = bit(l1.c, 12), f16c = bit(l1.c, 29),
             avx = bit(l1.c, 28);
  if (!osxsave || !avx) return f;
  const uint64_t x = xcr0();
  const bool ymm_state = (x & 0x6) == 0x6;     // SSE + AVX state
  const bool zmm_state = (x & 0xE0) == 0xE0;   // opmask, ZMM_Hi256, Hi16_ZMM
  const Regs l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  f.avx2 = ymm_state && fma && f16c && bit(l7.b, 5);
  f.avx_vnni = f.avx2 && bit(l7s1.a, 4);
  f.avx512 = f.avx2 && zmm_state && bit(l7.b, 16) && bit(l7.b, 17) && bit(l7.b, 30) &&
             bit(l7.b, 31);
  f.avx512_vnni = f.avx512 && bit(l7.c, 11);
  f.amx_cpuid = bit(l7.d, 24);
  f.amx_granted = f.amx_cpuid && (x & 0x60000) == 0x60000 && amx_permitted();
  return f;
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(avx_vnni, "avx_vnni");
  add(avx512, "avx512");
  add(avx512_vnni, "avx512_vnni");
  if (s.empty()) s = "baseline x86-64";
  s += amx_cpuid ? (amx_granted ? "; amx: granted (unused)" : "; amx: in cpuid, not granted (unused)")
                 : "; amx: absent";
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string_view isa_name(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::Scalar: return "scalar";
    case QuantIsa::Avx2: return "avx2";
    case QuantIsa::AvxVnni: return "avxvnni";
    case QuantIsa::Avx512Bw: return "avx512bw";
    case QuantIsa::Avx512Vnni: return "avx512vnni";
  }
  return "?";
}

bool parse_isa(std::string_view name, QuantIsa& out) {
  for (QuantIsa isa : kAllQuantIsas) {
    if (name == isa_name(isa)) {
      out = isa;
      return true;
    }
  }
  return false;
}

bool quant_isa_supported(QuantIsa isa) { return quant_isa_unsupported_reason(isa).empty(); }

std::string quant_isa_unsupported_reason(QuantIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case QuantIsa::Scalar: return "";
    case QuantIsa::Avx2: return f.avx2 ? "" : "CPU or OS lacks AVX2+FMA+F16C";
    case QuantIsa::AvxVnni: return f.avx_vnni ? "" : "CPU or OS lacks AVX-VNNI (VEX vpdpbusd)";
    case QuantIsa::Avx512Bw:
      return f.avx512 ? "" : "CPU or OS lacks AVX-512 F/BW/VL/DQ (or zmm state)";
    case QuantIsa::Avx512Vnni:
      return f.avx512_vnni ? "" : "CPU or OS lacks AVX-512 F/BW/VL/DQ + VNNI (or zmm state)";
  }
  return "unknown variant";
}

QuantIsa choose_quant_isa(const char* env, std::string* why) {
  return choose_variant(kAllQuantIsas, "PAGODA_CPU_ISA", env, isa_name, quant_isa_unsupported_reason,
                        why);
}

namespace {

struct Choice {
  QuantIsa isa = QuantIsa::Scalar;
  std::string why;
};

const Choice& choice() {
  static const Choice c = [] {
    Choice r;
    r.isa = choose_quant_isa(std::getenv("PAGODA_CPU_ISA"), &r.why);
    return r;
  }();
  return c;
}

}  // namespace

QuantIsa best_quant_isa() { return choice().isa; }

std::string cpu_isa_summary() {
  return "int8 kernels " + std::string(isa_name(choice().isa)) + " (" + choice().why +
         "; cpu: " + cpu_features().describe() + ")";
}

}  // namespace pagoda::gpu::cpu
