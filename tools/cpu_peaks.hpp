// Measured ceilings of this machine for the CPU kernel benchmark
// (tools/bench_kernels.cpp): the memory read bandwidth and the int8 peak of
// each int8 kernel variant, both on every thread of a pool, so a kernel's
// GB/s and GOP/s can be put against what the machine does at best.
//  - read bandwidth: the best of a few passes summing a buffer far larger
//    than the caches, split over the pool's threads: by default 4 x the
//    last-level cache the OS reports, at least 512 MiB and at most 2 GiB
//    (some VMs report a 480 MiB L3, which a 512 MiB buffer mostly fits, so
//    the reading moved between cache and memory speed);
//  - int8 peak: independent chains of the variant's inner integer
//    instruction sequence on registers (no memory): vpdpbusd (VNNI; 4 MACs
//    per int32 lane), or vpmaddubsw + vpaddw (AVX2 and AVX-512 BW: the
//    packed Q4 kernels' sequence, 2 MACs per int16 lane per pair), counting
//    2 operations per multiply-add. 0 for the scalar variant.
// With cpu_clock (meant for a 1-thread pool, whose work all runs on the
// caller) the time is the calling thread's CPU time, which other processes
// on a loaded machine disturb far less than the wall clock.
// Thread-safety: one call at a time per pool (they run parallel_for).
#pragma once

#include <cstddef>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/thread_pool.hpp"

namespace pagoda::tools {

// Bytes per second read from memory by all of pool's threads; bytes = 0:
// default_bandwidth_bytes().
double measure_read_bandwidth(gpu::cpu::ThreadPool& pool, bool cpu_clock = false, size_t bytes = 0);

// The default buffer of measure_read_bandwidth (see above).
size_t default_bandwidth_bytes();

// int8 operations per second of `isa`'s inner sequence on all of pool's
// threads (requires quant_isa_supported(isa)); 0 for Scalar.
double measure_int8_peak(gpu::cpu::QuantIsa isa, gpu::cpu::ThreadPool& pool,
                         bool cpu_clock = false);

// This thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();

}  // namespace pagoda::tools
