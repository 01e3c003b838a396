// Host memory figures for sizing the CPU backend's defaults (the KV cache
// budget). Linux: /proc/meminfo; elsewhere (or unreadable) 0 = unknown.
// Thread-safe (reads the file on each call).
#pragma once

#include <cstdint>
#include <string>

namespace pagoda::gpu::cpu {

// MemAvailable (the kernel's estimate of memory available to new
// allocations without swapping), in bytes; 0 when unknown.
uint64_t host_available_bytes();

// The default KV cache budget of the CPU backend: fraction (0, 1] of
// available memory, in whole MiB, at least floor_bytes; floor_bytes when the
// available memory is unknown. (The CPU cache's pages are committed only as
// blocks are first written, so a large budget costs address space, not RSS.)
uint64_t auto_kv_cache_bytes(double fraction, uint64_t floor_bytes);

// The KV budget a CLI run uses (like vLLM's gpu_memory_utilization, for host
// memory): `requested` when > 0 (--kv-cache-memory); else, when the run is on
// the CPU, kAutoKvFraction of available memory (at least kMinKvBytes); else
// kMinKvBytes (a CUDA run: device memory is not sized here). `how` says which.
inline constexpr double kAutoKvFraction = 0.3;
inline constexpr uint64_t kMinKvBytes = uint64_t(256) << 20;
struct KvBudget {
  uint64_t bytes = 0;
  std::string how;  // e.g. "auto: 30% of 21845 MiB available"
};
KvBudget kv_cache_budget(uint64_t requested, bool cpu_run);

}  // namespace pagoda::gpu::cpu
