// Tests for gpu/cpu/host_memory.hpp (the CPU backend's KV budget default).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "gpu/cpu/host_memory.hpp"

namespace pagoda::gpu::cpu {
namespace {

uint64_t mem_total_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  uint64_t v = 0;
  while (f >> key >> v >> unit) {
    if (key == "MemTotal:") return v * 1024;
  }
  return 0;
}

TEST(HostMemory, AvailableIsBelowTotal) {
  const uint64_t total = mem_total_bytes();
  if (total == 0) GTEST_SKIP() << "no /proc/meminfo MemTotal on this system";
  const uint64_t avail = host_available_bytes();
  EXPECT_GT(avail, 0u);
  EXPECT_LE(avail, total);
}

TEST(HostMemory, AutoBudgetIsAFractionInWholeMiB) {
  const uint64_t avail = host_available_bytes();
  if (avail == 0) GTEST_SKIP() << "available memory unknown here";
  const uint64_t floor = uint64_t(1) << 20;
  const uint64_t b = auto_kv_cache_bytes(0.3, floor);
  EXPECT_EQ(b % (uint64_t(1) << 20), 0u);
  // MemAvailable moves between the two reads; allow 64 MiB of drift.
  EXPECT_NEAR(double(b), 0.3 * double(avail), double(uint64_t(64) << 20));
  EXPECT_GE(auto_kv_cache_bytes(1e-9, uint64_t(5) << 20), uint64_t(5) << 20);  // the floor
  EXPECT_EQ(auto_kv_cache_bytes(0.0, 77), 77u);   // no fraction: the floor
  EXPECT_LE(auto_kv_cache_bytes(7.0, floor), avail + (uint64_t(64) << 20));  // capped at 1
}

TEST(HostMemory, BudgetRule) {
  const KvBudget forced = kv_cache_budget(12345, true);
  EXPECT_EQ(forced.bytes, 12345u);
  EXPECT_EQ(forced.how, "--kv-cache-memory");
  EXPECT_EQ(kv_cache_budget(0, false).bytes, kMinKvBytes);
  const KvBudget cpu = kv_cache_budget(0, true);
  EXPECT_GE(cpu.bytes, kMinKvBytes);
  EXPECT_EQ(cpu.how.rfind("auto", 0), 0u) << cpu.how;
}

}  // namespace
}  // namespace pagoda::gpu::cpu
