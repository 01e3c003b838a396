#include "gpu/cpu/host_memory.hpp"

#include <algorithm>
#include <fstream>
#include <string>

namespace pagoda::gpu::cpu {

uint64_t host_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0;
  while (f >> key >> value) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return value * 1024;  // the file's unit is kB
  }
  return 0;
}

uint64_t auto_kv_cache_bytes(double fraction, uint64_t floor_bytes) {
  const uint64_t avail = host_available_bytes();
  if (avail == 0 || !(fraction > 0.0)) return floor_bytes;
  const double f = std::min(fraction, 1.0);
  const uint64_t mib = uint64_t(double(avail) * f) >> 20;
  return std::max(mib << 20, floor_bytes);
}

KvBudget kv_cache_budget(uint64_t requested, bool cpu_run) {
  if (requested > 0) return {requested, "--kv-cache-memory"};
  if (!cpu_run) return {kMinKvBytes, "default for a CUDA run"};
  const uint64_t avail = host_available_bytes();
  const uint64_t bytes = auto_kv_cache_bytes(kAutoKvFraction, kMinKvBytes);
  if (avail == 0) return {bytes, "auto: available memory unknown"};
  return {bytes, "auto: " + std::to_string(int(kAutoKvFraction * 100 + 0.5)) + "% of " +
                     std::to_string(avail >> 20) + " MiB available"};
}

}  // namespace pagoda::gpu::cpu
