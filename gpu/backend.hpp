// Backend: the compute layer's one interface. Each op of gpu/ops.hpp is one
// virtual; the CPU backend (gpu/cpu/cpu_backend.hpp) runs them on host threads,
// a CUDA backend (gpu/cuda, later) enqueues kernels on its stream.
//
// Memory: the backend owns its memory; callers hold DeviceBuffers (RAII) and
// pass raw pointers from them in the op params. Allocation failure is a value
// (Result), never an exception.
//
// Ordering and threads: ops and transfers are issued by one thread at a time
// (the executor). They execute in issue order; on CUDA they may be
// asynchronous, and download() and synchronize() wait for everything issued
// before. The CPU backend runs each call to completion before returning.
// Ops are infallible (preconditions are the caller's; debug builds assert),
// except matmul, which reports an unsupported weight format as an Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "gpu/device_buffer.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/ops.hpp"
#include "gpu/pinned_buffer.hpp"
#include "gpu/result.hpp"
#include "gpu/rope_table.hpp"

namespace pagoda::gpu {

enum class BackendKind { kAuto, kCpu, kCuda };

// A recorded sequence of ops (CUDA: an instantiated CUDA graph), made by
// Backend::capture and replayed by Backend::replay on the backend that made
// it. Opaque; must not outlive that backend. Move-only by pointer.
class OpGraph {
 public:
  virtual ~OpGraph() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual BackendKind kind() const = 0;
  virtual std::string_view name() const = 0;
  // True when data() of this backend's buffers may be dereferenced on the host.
  virtual bool host_accessible() const = 0;

  // ---- memory -----------------------------------------------------------------
  // bytes == 0 gives an empty buffer. Alignment: at least 256 bytes.
  virtual Result<DeviceBuffer> allocate(size_t bytes) = 0;
  // Copies host bytes into dst at dst_offset / device bytes out of src. An
  // out-of-range (offset, bytes) is an Error; nothing is copied then.
  virtual Result<void> upload(DeviceBuffer& dst, size_t dst_offset, const void* src,
                              size_t bytes) = 0;
  virtual Result<void> download(const DeviceBuffer& src, size_t src_offset, void* dst,
                                size_t bytes) = 0;
  // Waits until every op issued so far has finished.
  virtual void synchronize() = 0;

  // ---- asynchronous uploads from pinned host memory (per-step metadata) -------
  // Host memory for upload_async sources (CUDA: page-locked; the default, for
  // the CPU backend: ordinary 256-byte-aligned memory). bytes == 0 gives an
  // empty buffer.
  virtual Result<PinnedBuffer> allocate_pinned(size_t bytes);
  // Queues a copy of host bytes into dst at dst_offset, ordered before every
  // op issued after it, and returns without waiting (CUDA: cudaMemcpyAsync on
  // the backend's stream). The caller must leave [src, src + bytes) unchanged
  // until the next synchronize() or download(); src should lie in a buffer
  // from allocate_pinned (other memory works, but CUDA then copies it
  // synchronously). An out-of-range (offset, bytes) is an Error, nothing
  // copied. The default (the CPU backend) is upload(): done on return.
  virtual Result<void> upload_async(DeviceBuffer& dst, size_t dst_offset, const void* src,
                                    size_t bytes);

  // ---- captured op sequences (CUDA graphs; decode steps) ---------------------
  // Records the ops `issue` enqueues into a graph WITHOUT running them.
  // Every pointer and scalar in their params is frozen: a replay reads and
  // writes the same addresses, so per-step inputs must be uploaded into the
  // same buffers before replay(). `issue` may only enqueue ops: no upload,
  // download, synchronize or allocate (scratch must already be large enough:
  // run the same ops eagerly once first). An Error when the backend cannot
  // capture (the default: the CPU backend; CUDA with PAGODA_CUDA_PROFILE set)
  // or recording failed; then nothing ran, no error stays pending and the
  // caller should issue the ops eagerly instead.
  virtual Result<std::unique_ptr<OpGraph>> capture(const std::function<Result<void>()>& issue);
  // Enqueues a graph made by this backend's capture(), ordered like an op.
  // An Error, with nothing enqueued, when the graph is stale (memory it
  // refers to moved since capture, e.g. grown scratch): capture it again.
  virtual Result<void> replay(const OpGraph& graph);

  // A KV cache of exactly num_blocks blocks (> 0) per layer.
  Result<KvCache> create_kv_cache(const KvCacheSpec& spec, int64_t num_blocks);
  // As many blocks as budget_bytes holds: budget / spec.bytes_per_block_all_layers().
  Result<KvCache> create_kv_cache_for_budget(const KvCacheSpec& spec, uint64_t budget_bytes);
  // The inverse frequencies of a rope config, computed on the host and uploaded.
  Result<RopeTable> create_rope_table(const RopeConfig& config);

  // ---- ops (see gpu/ops.hpp for the exact semantics) --------------------------
  virtual void embedding(const EmbeddingParams& p) = 0;
  virtual void rms_norm(const RmsNormParams& p) = 0;
  virtual void rope(const RopeParams& p) = 0;
  virtual void silu_mul(const SiluMulParams& p) = 0;
  virtual void kv_cache_write(const KvCacheWriteParams& p) = 0;
  virtual void paged_attention(const PagedAttentionParams& p) = 0;
  virtual void copy_blocks(const CopyBlocksParams& p) = 0;
  virtual void sample(const SamplingParams& p) = 0;
  // Slot for the GEMMs (gpu/cpu/quant_matmul, cuBLAS): wired by the lead.
  virtual Result<void> matmul(const MatmulParams& p) = 0;
  // Gemma's ops. Only the CPU backend implements them today; the defaults
  // print the op's name and abort (model/ refuses Gemma on other backends at
  // load, so they are never reached).
  virtual void gelu_tanh_mul(const GeluMulParams& p);
  virtual void scale_cap(const ScaleCapParams& p);

  // Fused pairs, with exactly the results of the two ops in order (the
  // defaults run them one after the other; the CPU does the first three each
  // in one pass over the rows, quantizing the matmul's activations on the
  // way when its weight is block-quantized; CUDA has the producer write the
  // matmul's bf16 input). mm.x must be the first op's output.
  virtual void rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w) {
    rope(r);
    kv_cache_write(w);
  }
  virtual Result<void> rms_norm_matmul(const RmsNormParams& n, const MatmulParams& mm) {
    rms_norm(n);
    return matmul(mm);
  }
  virtual Result<void> silu_mul_matmul(const SiluMulParams& s, const MatmulParams& mm) {
    silu_mul(s);
    return matmul(mm);
  }
  // The attention output into the o projection (CUDA: the attention kernel
  // also stores its output as the matmul's bf16 input).
  virtual Result<void> paged_attention_matmul(const PagedAttentionParams& a,
                                              const MatmulParams& mm) {
    paged_attention(a);
    return matmul(mm);
  }

 protected:
  // Implementations wrap a fresh allocation into a DeviceBuffer that will call
  // release(ptr, bytes) on destruction.
  DeviceBuffer wrap_allocation(void* ptr, size_t bytes) { return DeviceBuffer(this, ptr, bytes); }
  // Frees memory handed out by allocate(); never fails.
  virtual void release(void* ptr, size_t bytes) noexcept = 0;

 private:
  friend class DeviceBuffer;
};

// Options for make_backend. memory_limit_bytes caps what the CPU backend will
// allocate (0 = no cap: allocation fails only when the system refuses);
// cpu_threads sizes a private thread pool (0 = the process-wide pool).
// The remaining fields switch CUDA step features off (the CPU backend
// ignores them): async_uploads = false makes upload_async a synchronous
// upload(); tiled_prefill = false sends every attention row to the
// one-CTA-per-row kernel instead of the tensor-core tiled prefill kernel
// (used for sequences with >= tiled_prefill_min_rows query rows, BF16 cache);
// decode_kernels = false turns off the decode path's own kernels (the BF16
// GEMV for M <= 8 and the fused rope_kv_write / rms_norm_matmul /
// silu_mul_matmul): cuBLAS and the ops one by one instead.
struct BackendOptions {
  uint64_t memory_limit_bytes = 0;
  size_t cpu_threads = 0;
  bool async_uploads = true;
  bool tiled_prefill = true;
  int32_t tiled_prefill_min_rows = 16;
  bool decode_kernels = true;
};

// The CUDA step features switched off by the environment, for programs that
// have no flags for them (the GPU tests run by tools/gpu-check.sh after a
// feature failed). A variable can only turn its feature off (or set the
// split-K partition): PAGODA_CUDA_GRAPHS=off, PAGODA_CUDA_PREFILL_KERNEL=
// rowwise, PAGODA_CUDA_ASYNC_UPLOADS=off, PAGODA_CUDA_DECODE_KERNELS=off,
// PAGODA_CUDA_SPLIT_K=N (0: off; -1 here when unset or not a number in
// [0, 2^20]). Read on every call.
struct StepFeatureEnv {
  bool graphs_off = false, rowwise_prefill = false, sync_uploads = false;
  bool decode_kernels_off = false;
  int32_t split_k = -1;
};
StepFeatureEnv step_feature_env();
// `options` with the environment's switches applied (tiled_prefill,
// async_uploads, decode_kernels).
BackendOptions with_feature_env(BackendOptions options);

// kCpu: the CPU backend. kCuda: the CUDA backend (its options passed through
// with_feature_env), or an Error when the build has no CUDA or no device is
// usable. kAuto: CUDA when usable, else CPU.
Result<std::unique_ptr<Backend>> make_backend(BackendKind kind, const BackendOptions& options = {});

}  // namespace pagoda::gpu
