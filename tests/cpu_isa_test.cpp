// Tests for gpu/cpu/cpu_isa.hpp: feature detection against libgcc's
// independent __builtin_cpu_supports (which also checks the OS-enabled
// state), the variant choice rule and PAGODA_CPU_ISA parsing.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "gpu/cpu/cpu_isa.hpp"

namespace pagoda::gpu::cpu {
namespace {

TEST(CpuIsa, FeaturesAgreeWithLibgcc) {
  __builtin_cpu_init();
  const CpuFeatures& f = cpu_features();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_EQ(f.avx2, avx2);  // F16C: every AVX2 CPU so far has it; detection requires it
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  EXPECT_EQ(f.avx512, avx512);
  EXPECT_EQ(f.avx512_vnni, avx512 && __builtin_cpu_supports("avx512vnni"));
  // Implications the dispatch relies on.
  EXPECT_TRUE(!f.avx_vnni || f.avx2);
  EXPECT_TRUE(!f.avx512_vnni || f.avx512);
  EXPECT_TRUE(!f.amx_granted || f.amx_cpuid);
  std::printf("cpu features: %s\n", f.describe().c_str());
}

TEST(CpuIsa, NamesRoundTrip) {
  for (QuantIsa isa : kAllQuantIsas) {
    QuantIsa back = QuantIsa::Scalar;
    ASSERT_TRUE(parse_isa(isa_name(isa), back)) << isa_name(isa);
    EXPECT_EQ(back, isa);
  }
  QuantIsa out = QuantIsa::Avx2;
  EXPECT_FALSE(parse_isa("amx", out));
  EXPECT_FALSE(parse_isa("", out));
  EXPECT_FALSE(parse_isa("AVX2 ", out));
  EXPECT_EQ(out, QuantIsa::Avx2);  // untouched on failure
}

TEST(CpuIsa, ChoiceRule) {
  QuantIsa best = QuantIsa::Scalar;
  for (QuantIsa isa : kAllQuantIsas) {
    if (quant_isa_supported(isa)) best = isa;
  }
  std::string why;
  EXPECT_EQ(choose_quant_isa(nullptr, &why), best);
  EXPECT_EQ(why, "best supported");
  EXPECT_EQ(choose_quant_isa("", &why), best);
  EXPECT_EQ(choose_quant_isa("bogus", &why), best);
  EXPECT_NE(why.find("bogus"), std::string::npos) << why;
  EXPECT_EQ(choose_quant_isa("scalar", &why), QuantIsa::Scalar);
  EXPECT_EQ(why, "forced by PAGODA_CPU_ISA");
  for (QuantIsa isa : kAllQuantIsas) {
    const QuantIsa got = choose_quant_isa(isa_name(isa).data(), &why);
    if (quant_isa_supported(isa)) {
      EXPECT_EQ(got, isa);
      EXPECT_TRUE(quant_isa_unsupported_reason(isa).empty());
    } else {
      EXPECT_EQ(got, best) << isa_name(isa);
      EXPECT_FALSE(quant_isa_unsupported_reason(isa).empty());
    }
  }
  EXPECT_TRUE(quant_isa_supported(best_quant_isa()));
  EXPECT_NE(cpu_isa_summary().find(isa_name(best_quant_isa())), std::string::npos);
}

// The choice rule on simulated CPUs (the variant order of kAllQuantIsas):
// AVX-512 F/BW/VL/DQ without VNNI (Skylake-class Xeons) gets avx512bw, AVX2
// alone avx2, AVX2 + AVX-VNNI (Alder Lake) avxvnni, AVX-512 VNNI avx512vnni.
TEST(CpuIsa, ChoiceOnSimulatedCpus) {
  struct Sim {
    CpuFeatures f;
    QuantIsa want;
  };
  const Sim sims[] = {{{false, false, false, false}, QuantIsa::Scalar},
                      {{true, false, false, false}, QuantIsa::Avx2},
                      {{true, true, false, false}, QuantIsa::AvxVnni},
                      {{true, false, true, false}, QuantIsa::Avx512Bw},
                      {{true, false, true, true}, QuantIsa::Avx512Vnni},
                      {{true, true, true, true}, QuantIsa::Avx512Vnni}};
  for (const Sim& s : sims) {
    auto lacks = [&](QuantIsa isa) -> std::string {
      const bool ok = isa == QuantIsa::Scalar || (isa == QuantIsa::Avx2 && s.f.avx2) ||
                      (isa == QuantIsa::AvxVnni && s.f.avx_vnni) ||
                      (isa == QuantIsa::Avx512Bw && s.f.avx512) ||
                      (isa == QuantIsa::Avx512Vnni && s.f.avx512_vnni);
      return ok ? "" : "lacks it";
    };
    std::string why;
    EXPECT_EQ(choose_variant(kAllQuantIsas, "PAGODA_CPU_ISA", nullptr, isa_name, lacks, &why), s.want)
        << s.f.describe();
    // Forcing avx512bw works wherever AVX-512 BW is present.
    const QuantIsa forced =
        choose_variant(kAllQuantIsas, "PAGODA_CPU_ISA", "avx512bw", isa_name, lacks, &why);
    EXPECT_EQ(forced, s.f.avx512 ? QuantIsa::Avx512Bw : s.want) << why;
  }
}

}  // namespace
}  // namespace pagoda::gpu::cpu
