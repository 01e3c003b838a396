// CudaBackend: memory, transfers, error bookkeeping and the op forwarding (see
// cuda_backend.hpp for the contracts). prepare_weight lives in
// prepare_weight.cu, the kernels in the per-op .cu files.
#include "gpu/cuda/cuda_backend.hpp"
#include "gpu/cuda/op_profile.cuh"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/cuda/cuda_probe.hpp"

namespace pagoda::gpu::cuda {

namespace {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // Hopper's recommendation

Result<void> check_range(size_t buffer_bytes, size_t offset, size_t bytes, const char* what) {
  if (offset > buffer_bytes || bytes > buffer_bytes - offset) {
    return make_error(std::string("cuda ") + what + ": range [" + std::to_string(offset) +
                      ", +" + std::to_string(bytes) + ") is outside a buffer of " +
                      std::to_string(buffer_bytes) + " bytes");
  }
  return {};
}

// A pinned buffer's UploadFence: one event (no timing) recorded on the
// backend's stream after the uploads from the buffer. Failures fall back to
// waiting for the whole stream; their errors are cleared here (a sticky
// fault resurfaces at the backend's next synchronize).
class EventUploadFence final : public UploadFence {
 public:
  EventUploadFence(cudaStream_t stream, cudaEvent_t event) : stream_(stream), event_(event) {}
  ~EventUploadFence() override {
    cudaEventDestroy(event_);
    cudaGetLastError();
  }
  void record() noexcept override {
    recorded_ = cudaEventRecord(event_, stream_) == cudaSuccess;
    if (!recorded_) cudaGetLastError();
  }
  void wait() noexcept override {
    const cudaError_t err =
        recorded_ ? cudaEventSynchronize(event_) : cudaStreamSynchronize(stream_);
    if (err != cudaSuccess) cudaGetLastError();
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t event_;
  bool recorded_ = false;
};

}  // namespace

CudaBackend::CudaBackend(const BackendOptions& options)
    : limit_(options.memory_limit_bytes),
      async_uploads_(options.async_uploads),
      tiled_prefill_(options.tiled_prefill),
      decode_kernels_(options.decode_kernels),
      tiled_min_rows_(std::max<int32_t>(options.tiled_prefill_min_rows, 1)) {}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(const BackendOptions& options) {
  const ProbeResult probed = probe();
  if (probed.device_count == 0) {
    return make_error("cuda backend: no usable device: " + probed.error);
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(options));
  PAGODA_CUDA_TRY(backend->init());
  return Result<std::unique_ptr<CudaBackend>>(std::move(backend));
}

Result<void> CudaBackend::init() {
  PAGODA_CUDA_TRY(check_cuda(cudaSetDevice(device_), "cudaSetDevice"));
  cudaDeviceProp prop{};
  PAGODA_CUDA_TRY(check_cuda(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties"));
  name_ = std::string("cuda:") + prop.name;
  profiler_.reset(OpProfiler::from_env());
  sm_count_ = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
  cudaStream_t stream = nullptr;
  PAGODA_CUDA_TRY(check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags"));
  stream_ = stream;
  cublasHandle_t handle = nullptr;
  PAGODA_CUDA_TRY(check_cublas(cublasCreate(&handle), "cublasCreate"));
  cublas_ = handle;
  PAGODA_CUDA_TRY(check_cublas(cublasSetStream(cublas_, stream_), "cublasSetStream"));
  PAGODA_CUDA_TRY(check_cublas(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH),
                               "cublasSetMathMode"));
  auto ws = ensure(cublas_workspace_, kCublasWorkspaceBytes);
  if (!ws) return ws.error();
  PAGODA_CUDA_TRY(check_cublas(cublasSetWorkspace(cublas_, *ws, kCublasWorkspaceBytes),
                               "cublasSetWorkspace"));
  return {};
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (profiler_) profiler_->collect();
  profiler_.reset();  // writes its file
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  for (Scratch* s : {&cublas_workspace_, &attention_scratch_, &sampling_scratch_,
                     &matmul_scratch_}) {
    free_scratch(*s);
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  cudaGetLastError();
}

// ---- errors ---------------------------------------------------------------------

void CudaBackend::record(const Result<void>& r) {
  if (!r && !pending_) pending_ = r.error();
}

Result<void> CudaBackend::take_error() {
  if (!pending_) return {};
  Error e = std::move(*pending_);
  pending_.reset();
  return e;
}

void CudaBackend::synchronize() {
  record(check_cuda(cudaStreamSynchronize(stream_), "synchronize (an earlier kernel failed)"));
  if (profiler_) profiler_->collect();
}

Result<void> CudaBackend::check() {
  synchronize();
  return take_error();
}

// ---- memory ---------------------------------------------------------------------

Result<DeviceBuffer> CudaBackend::allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  const uint64_t before = allocated_.fetch_add(bytes);
  if (limit_ != 0 && before + bytes > limit_) {
    allocated_.fetch_sub(bytes);
    return make_error("cuda backend: allocating " + std::to_string(bytes) +
                      " bytes would exceed the memory limit of " + std::to_string(limit_) +
                      " (" + std::to_string(before) + " in use)");
  }
  void* ptr = nullptr;
  cudaError_t err = cudaSetDevice(device_);
  if (err == cudaSuccess) err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an out-of-memory error is not sticky: clear it
    allocated_.fetch_sub(bytes);
    const std::string what = "cudaMalloc of " + std::to_string(bytes) + " bytes";
    return cuda_error(what.c_str(), err);
  }
  return wrap_allocation(ptr, bytes);
}

void CudaBackend::release(void* ptr, size_t bytes) noexcept {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);  // ops issued earlier may still use the memory
  cudaFree(ptr);
  cudaGetLastError();
  allocated_.fetch_sub(bytes);
}

Result<void*> CudaBackend::ensure(Scratch& s, size_t bytes) {
  if (bytes <= s.bytes) return s.ptr;
  if (capturing_) {
    return make_error("cuda: scratch would grow during graph capture (run the ops eagerly first)");
  }
  ++scratch_epoch_;  // graphs captured with the old buffer are stale now
  free_scratch(s);
  const size_t want = bytes + bytes / 4;  // some headroom against regrowth
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, want) != cudaSuccess) {
    cudaGetLastError();
    PAGODA_CUDA_TRY(check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc (scratch)"));
    s.bytes = bytes;
  } else {
    s.bytes = want;
  }
  s.ptr = ptr;
  return ptr;
}

void CudaBackend::free_scratch(Scratch& s) noexcept {
  if (s.ptr == nullptr) return;
  cudaStreamSynchronize(stream_);
  cudaFree(s.ptr);
  cudaGetLastError();
  s = Scratch{};
}

Result<DeviceMemoryInfo> CudaBackend::memory_info() {
  size_t free_bytes = 0, total_bytes = 0;
  PAGODA_CUDA_TRY(check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  return DeviceMemoryInfo{free_bytes, total_bytes};
}

// ---- transfers ------------------------------------------------------------------

Result<void> CudaBackend::upload(DeviceBuffer& dst, size_t dst_offset, const void* src,
                                 size_t bytes) {
  PAGODA_CUDA_TRY(check_range(dst.size(), dst_offset, bytes, "upload"));
  if (bytes == 0) return {};
  PAGODA_CUDA_TRY(check_cuda(cudaMemcpyAsync(static_cast<char*>(dst.data()) + dst_offset, src,
                                             bytes, cudaMemcpyHostToDevice, stream_),
                             "upload"));
  auto synced = check_cuda(cudaStreamSynchronize(stream_), "upload (or an earlier op)");
  if (profiler_) profiler_->collect();
  return synced;
}

Result<PinnedBuffer> CudaBackend::allocate_pinned(size_t bytes) {
  if (bytes == 0) return PinnedBuffer();
  void* p = nullptr;
  PAGODA_CUDA_TRY(check_cuda(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc"));
  auto free_fn = [](void* q) noexcept { (void)cudaFreeHost(q); };
  cudaEvent_t event = nullptr;
  if (auto made = check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                             "cudaEventCreateWithFlags (pinned buffer fence)");
      !made) {
    free_fn(p);
    return made.error();
  }
  return PinnedBuffer(p, bytes, free_fn, std::make_unique<EventUploadFence>(stream_, event));
}

// Errors of the queued copy itself surface at the next synchronize/download.
Result<void> CudaBackend::upload_async(DeviceBuffer& dst, size_t dst_offset, const void* src,
                                       size_t bytes) {
  if (!async_uploads_) return upload(dst, dst_offset, src, bytes);
  PAGODA_CUDA_TRY(check_range(dst.size(), dst_offset, bytes, "upload_async"));
  if (bytes == 0) return {};
  return check_cuda(cudaMemcpyAsync(static_cast<char*>(dst.data()) + dst_offset, src, bytes,
                                    cudaMemcpyHostToDevice, stream_),
                    "upload_async");
}

Result<void> CudaBackend::download(const DeviceBuffer& src, size_t src_offset, void* dst,
                                   size_t bytes) {
  PAGODA_CUDA_TRY(check_range(src.size(), src_offset, bytes, "download"));
  if (bytes > 0) {
    record(check_cuda(cudaMemcpyAsync(dst, static_cast<const char*>(src.data()) + src_offset,
                                      bytes, cudaMemcpyDeviceToHost, stream_),
                      "download"));
  }
  synchronize();
  return take_error();
}

// ---- ops --------------------------------------------------------------------------

// Each op is bracketed for the profiler (a no-op unless PAGODA_CUDA_PROFILE is set).
#define PAGODA_PROFILE(cat) OpScope op_scope_(profiler_.get(), OpCategory::cat, stream_)

void CudaBackend::embedding(const EmbeddingParams& p) {
  PAGODA_PROFILE(kOther);
  record(launch_embedding(p, stream_));
}
void CudaBackend::rms_norm(const RmsNormParams& p) {
  PAGODA_PROFILE(kOther);
  record(launch_rms_norm(p, stream_));
}
void CudaBackend::rope(const RopeParams& p) {
  PAGODA_PROFILE(kOther);
  record(launch_rope(p, stream_));
}
void CudaBackend::silu_mul(const SiluMulParams& p) {
  PAGODA_PROFILE(kOther);
  record(launch_silu_mul(p, stream_));
}
void CudaBackend::copy_blocks(const CopyBlocksParams& p) {
  PAGODA_PROFILE(kOther);
  record(launch_copy_blocks(p, stream_));
}
void CudaBackend::kv_cache_write(const KvCacheWriteParams& p) {
  PAGODA_PROFILE(kKvWrite);
  record(launch_kv_cache_write(p, stream_));
}

// Sequences with >= tiled_min_rows_ query rows go to the tiled prefill
// kernel when it is on and supports the shape; the rest to the row kernel.
void CudaBackend::paged_attention(const PagedAttentionParams& p) {
  const int32_t partition = attention_partition_size(p, sm_count_);
  auto scratch = ensure(attention_scratch_, attention_scratch_bytes(p, partition));
  if (!scratch) return record(scratch.error());
  const bool tiled = tiled_prefill_ && p.meta.max_query_len >= tiled_min_rows_ &&
                     tiled_prefill_supported(p);
  PAGODA_PROFILE(kAttention);
  record(launch_paged_attention(p, partition, *scratch, stream_, tiled ? tiled_min_rows_ : 0));
  if (tiled) record(launch_tiled_prefill(p, tiled_min_rows_, stream_));
}

void CudaBackend::sample(const SamplingParams& p) {
  auto scratch = ensure(sampling_scratch_, sampling_scratch_bytes(p));
  if (!scratch) return record(scratch.error());
  PAGODA_PROFILE(kSampling);
  record(launch_sample(p, *scratch, stream_));
}

Result<void> CudaBackend::matmul(const MatmulParams& p) {
  auto scratch = ensure(matmul_scratch_, matmul_scratch_bytes(p));
  if (!scratch) return scratch.error();
  PAGODA_PROFILE(kGemm);
  return run_matmul(p, cublas_, *scratch, stream_, decode_kernels_);
}

// ---- fused pairs of the decode path ------------------------------------------------

void CudaBackend::rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w) {
  if (!decode_kernels_ || !rope_kv_fusable(r, w)) return Backend::rope_kv_write(r, w);
  PAGODA_PROFILE(kKvWrite);
  record(launch_rope_kv_write(r, w, stream_));
}

bool CudaBackend::bf16_fusable(const MatmulParams& mm, const float* out, int64_t rows,
                               int64_t width) {
  return mm.weight.format == WeightFormat::BF16 && mm.x == out && mm.m == rows && rows > 0 &&
         mm.x_stride == width && mm.weight.k == width && mm.y != nullptr &&
         mm.weight.data != nullptr;
}

Result<void> CudaBackend::rms_norm_matmul(const RmsNormParams& n, const MatmulParams& mm) {
  if (!decode_kernels_ || !bf16_fusable(mm, n.out, n.num_tokens, n.hidden)) {
    return Backend::rms_norm_matmul(n, mm);
  }
  auto xb = ensure(matmul_scratch_, matmul_scratch_bytes(mm));
  if (!xb) return xb.error();
  {
    PAGODA_PROFILE(kOther);
    record(launch_rms_norm(n, stream_, *xb));
  }
  PAGODA_PROFILE(kGemm);
  return run_matmul_bf16(mm, *xb, cublas_, stream_);
}

Result<void> CudaBackend::silu_mul_matmul(const SiluMulParams& s, const MatmulParams& mm) {
  if (!decode_kernels_ || !bf16_fusable(mm, s.out, s.num_tokens, s.intermediate)) {
    return Backend::silu_mul_matmul(s, mm);
  }
  auto xb = ensure(matmul_scratch_, matmul_scratch_bytes(mm));
  if (!xb) return xb.error();
  {
    PAGODA_PROFILE(kOther);
    record(launch_silu_mul(s, stream_, *xb));
  }
  PAGODA_PROFILE(kGemm);
  return run_matmul_bf16(mm, *xb, cublas_, stream_);
}

Result<void> CudaBackend::paged_attention_matmul(const PagedAttentionParams& a,
                                                 const MatmulParams& mm) {
  const bool tiled = tiled_prefill_ && a.meta.max_query_len >= tiled_min_rows_ &&
                     tiled_prefill_supported(a);
  const int64_t width = int64_t{a.num_q_heads} * a.layout.head_dim;
  if (!decode_kernels_ || tiled || !bf16_fusable(mm, a.out, a.meta.num_tokens, width)) {
    return Backend::paged_attention_matmul(a, mm);
  }
  const int32_t partition = attention_partition_size(a, sm_count_);
  auto scratch = ensure(attention_scratch_, attention_scratch_bytes(a, partition));
  if (!scratch) return scratch.error();
  auto xb = ensure(matmul_scratch_, matmul_scratch_bytes(mm));
  if (!xb) return xb.error();
  {
    PAGODA_PROFILE(kAttention);
    record(launch_paged_attention(a, partition, *scratch, stream_, 0, *xb));
  }
  PAGODA_PROFILE(kGemm);
  return run_matmul_bf16(mm, *xb, cublas_, stream_);
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options) {
  auto backend = CudaBackend::create(options);
  if (!backend) return backend.error();
  return Result<std::unique_ptr<Backend>>(std::unique_ptr<Backend>(std::move(backend).value()));
}

}  // namespace pagoda::gpu::cuda
