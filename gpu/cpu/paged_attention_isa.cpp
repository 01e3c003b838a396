// Which paged-attention kernel variant runs (cpu_ops.hpp: AttnIsa,
// choose_attn_isa, best_attn_isa; paged_attention_kernels.hpp: kernels_for).
// AVX2 needs cpu_features().avx2 (AVX2+FMA+F16C, OS ymm state), AVX-512
// cpu_features().avx512 (F/BW/VL/DQ, OS zmm/opmask state); the portable
// variant runs everywhere. Thread-safety: best_attn_isa is computed once.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/paged_attention_kernels.hpp"

namespace pagoda::gpu::cpu {

const char* attn_isa_name(AttnIsa isa) {
  switch (isa) {
    case AttnIsa::kPortable: return "portable";
    case AttnIsa::kAvx2: return "avx2";
    case AttnIsa::kAvx512: return "avx512";
  }
  return "?";
}

std::string attn_isa_unsupported_reason(AttnIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case AttnIsa::kPortable: return "";
    case AttnIsa::kAvx2: return f.avx2 ? "" : "CPU or OS lacks AVX2+FMA+F16C";
    case AttnIsa::kAvx512:
      return f.avx512 ? "" : "CPU or OS lacks AVX-512 F/BW/VL/DQ (or zmm state)";
  }
  return "unknown variant";
}

AttnIsa choose_attn_isa(const char* env, std::string* why) {
  return choose_variant(kAllAttnIsas, "PAGODA_CPU_ATTN_ISA", env, attn_isa_name,
                        attn_isa_unsupported_reason, why);
}

AttnIsa best_attn_isa() {
  static const AttnIsa chosen = [] {
    const char* env = std::getenv("PAGODA_CPU_ATTN_ISA");
    std::string why;
    const AttnIsa isa = choose_attn_isa(env, &why);
    if (env != nullptr && *env != '\0' && why.rfind("forced", 0) != 0) {
      std::fprintf(stderr, "paged attention kernels %s (%s)\n", attn_isa_name(isa), why.c_str());
    }
    return isa;
  }();
  return chosen;
}

namespace attn {

const Kernels& kernels_for(AttnIsa isa, int32_t D) {
  const Kernels* k = &portable_kernels();
  if (!attn_isa_unsupported_reason(isa).empty()) return *k;
  if (isa == AttnIsa::kAvx512) k = &avx512_kernels();
  if (isa == AttnIsa::kAvx2) k = &avx2_kernels();
  return D % k->d_multiple == 0 ? *k : portable_kernels();
}

}  // namespace attn

}  // namespace pagoda::gpu::cpu
