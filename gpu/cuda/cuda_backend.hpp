// CudaBackend: the Backend (gpu/backend.hpp) that runs every op as CUDA
// kernels (gpu/cuda/*.cu) and the GEMMs through cuBLAS, on device 0.
//
// Memory: allocate() is cudaMalloc (256-byte aligned), capped by
// BackendOptions::memory_limit_bytes when set; host_accessible() is false.
// Scratch for split-K attention, sampling and matmul is grow-only, owned by
// the backend and not counted against the cap.
//
// Step features (BackendOptions): async_uploads, tiled_prefill (the
// FlashAttention-2 style kernel of prefill_attention.cu for long prompts),
// decode_kernels (the BF16 GEMV for M <= 8 and the fused decode pairs) and
// capture()/replay() (CUDA graphs) can each be switched off by the caller.
//
// Ordering: everything runs on one non-blocking stream in issue order. Ops
// return at once (asynchronous). upload() waits until its bytes have reached
// the device (so the caller may reuse its host memory at once; v1: it also
// waits for the ops issued before it); download() waits for everything issued
// before it and for its own copy.
//
// Errors: allocate/upload/download/prepare_weight/matmul return them. The void
// ops record the first failure (an unsupported shape, a launch error) and
// synchronize() records asynchronous kernel faults; the recorded error is
// returned (once) by the next download() or check(). No call aborts.
//
// Thread-safety: like every Backend, one issuing thread at a time; allocate
// and buffer release are also safe from other threads.
//
// This header includes no CUDA header (stream and cuBLAS handle are forward
// declared), so plain C++ code may include it; it is compiled only with
// PAGODA_CUDA (PAGODA_HAVE_CUDA is defined then).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gpu/backend.hpp"
#include "gpu/weight_format.hpp"

struct CUstream_st;    // = cudaStream_t's pointee
struct cublasContext;  // = cublasHandle_t's pointee

namespace pagoda::gpu::cuda {

class OpProfiler;  // gpu/cuda/op_profile.cuh (PAGODA_CUDA_PROFILE)

// A weight on the device in a format the CUDA matmul takes (BF16 or F32);
// `weight` views `storage`. Pass `weight` in MatmulParams. Move-only; must
// not outlive its backend.
struct DeviceWeight {
  LinearWeight weight;
  DeviceBuffer storage;
};

struct DeviceMemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

class CudaBackend final : public Backend {
 public:
  // An Error when no device is usable (no driver, no device) or when the
  // stream, cuBLAS handle or workspace cannot be created.
  static Result<std::unique_ptr<CudaBackend>> create(const BackendOptions& options);
  ~CudaBackend() override;

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string_view name() const override { return name_; }
  bool host_accessible() const override { return false; }

  Result<DeviceBuffer> allocate(size_t bytes) override;
  Result<void> upload(DeviceBuffer& dst, size_t dst_offset, const void* src,
                      size_t bytes) override;
  Result<void> download(const DeviceBuffer& src, size_t src_offset, void* dst,
                        size_t bytes) override;
  void synchronize() override;
  // cudaHostAlloc'd (page-locked) memory with an event as its UploadFence
  // (gpu/pinned_buffer.hpp); cudaMemcpyAsync on the stream, no wait.
  Result<PinnedBuffer> allocate_pinned(size_t bytes) override;
  Result<void> upload_async(DeviceBuffer& dst, size_t dst_offset, const void* src,
                            size_t bytes) override;
  // CUDA graphs: stream capture (thread-local mode) of `issue`, instantiated.
  // Refused while PAGODA_CUDA_PROFILE is set (every op is timed eagerly
  // then). A graph is stale once any scratch buffer has been reallocated.
  Result<std::unique_ptr<OpGraph>> capture(const std::function<Result<void>()>& issue) override;
  Result<void> replay(const OpGraph& graph) override;

  void embedding(const EmbeddingParams& p) override;
  void rms_norm(const RmsNormParams& p) override;
  void rope(const RopeParams& p) override;
  void silu_mul(const SiluMulParams& p) override;
  void kv_cache_write(const KvCacheWriteParams& p) override;
  void paged_attention(const PagedAttentionParams& p) override;
  void copy_blocks(const CopyBlocksParams& p) override;
  void sample(const SamplingParams& p) override;
  Result<void> matmul(const MatmulParams& p) override;

  // The decode path's fused pairs (results as the two ops in order):
  // rope_kv_write is one kernel when the rope's k is the write's k (else the
  // two launches); rms_norm_matmul / silu_mul_matmul with a BF16 weight whose
  // x is the first op's out (packed rows) have the producer store its output
  // in bf16 too, straight into the matmul's scratch, and the matmul (GEMV for
  // M <= 8, else cuBLAS) reads that: no conversion kernel. Other weights,
  // and BackendOptions::decode_kernels = false: the two ops in turn.
  void rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w) override;
  Result<void> rms_norm_matmul(const RmsNormParams& n, const MatmulParams& mm) override;
  Result<void> silu_mul_matmul(const SiluMulParams& s, const MatmulParams& mm) override;
  // Likewise for the o projection, when no row goes to the tiled prefill
  // kernel (it writes fp32 only): both attention kernels (and the split-K
  // merge) store the bf16 input as well.
  Result<void> paged_attention_matmul(const PagedAttentionParams& a,
                                      const MatmulParams& mm) override;

  // ---- CUDA only ------------------------------------------------------------------
  // Converts a host weight (any WeightFormat; host.data in host memory) to
  // `target` (BF16: dequantise to fp32, round to nearest even; F32: exact
  // dequantisation) and uploads it. Synchronous.
  Result<DeviceWeight> prepare_weight(const LinearWeight& host,
                                      WeightFormat target = WeightFormat::BF16);
  // Waits for all issued work; returns (and clears) the first recorded error.
  Result<void> check();
  Result<DeviceMemoryInfo> memory_info();
  int sm_count() const { return sm_count_; }
  CUstream_st* stream() const { return stream_; }
  uint64_t allocated_bytes() const { return allocated_.load(); }

 protected:
  void release(void* ptr, size_t bytes) noexcept override;

 private:
  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };

  explicit CudaBackend(const BackendOptions& options);
  Result<std::unique_ptr<OpGraph>> end_capture(const Result<void>& issued, bool had_pending);
  Result<void> init();
  void record(const Result<void>& r);
  Result<void> take_error();
  Result<void*> ensure(Scratch& s, size_t bytes);
  // Whether mm (BF16) reads exactly the rows x producer writes [rows, width].
  static bool bf16_fusable(const MatmulParams& mm, const float* out, int64_t rows,
                           int64_t width);
  void free_scratch(Scratch& s) noexcept;

  int device_ = 0;
  int sm_count_ = 1;
  std::string name_ = "cuda";
  CUstream_st* stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  Scratch cublas_workspace_, attention_scratch_, sampling_scratch_, matmul_scratch_;
  uint64_t limit_ = 0;
  bool async_uploads_ = true, tiled_prefill_ = true, decode_kernels_ = true;
  int32_t tiled_min_rows_ = 16;
  bool capturing_ = false;       // inside capture(): scratch must not move
  uint64_t scratch_epoch_ = 0;   // bumped whenever a scratch buffer is reallocated
  std::atomic<uint64_t> allocated_{0};
  std::optional<Error> pending_;  // the first error not yet reported
  std::unique_ptr<OpProfiler> profiler_;  // null unless PAGODA_CUDA_PROFILE is set
};

// The factory for make_backend's CUDA hook: CudaBackend::create as a Backend.
Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options);

}  // namespace pagoda::gpu::cuda
