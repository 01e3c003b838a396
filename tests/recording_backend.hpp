// RecordingBackend: a Backend that forwards everything to an inner backend
// (the CPU backend) and implements capture()/replay() with CUDA-graph
// semantics on the host: capture() records each op the callback issues, its
// params copied by value (every pointer and scalar frozen), without running
// it; replay() issues the recorded ops again, reading and writing whatever
// the frozen addresses hold then. Transfers, synchronize and allocation are
// refused while capturing (as stream capture refuses them), which fails the
// capture. With it, LlamaModel's graph path (model/step_graphs.hpp,
// RunState::stage_padded) runs and is checked without a device.
// Test-only; one issuing thread; buffers belong to the inner backend.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "gpu/backend.hpp"

namespace pagoda::gpu::test {

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  BackendKind kind() const override { return inner_->kind(); }
  std::string_view name() const override { return "recording"; }
  bool host_accessible() const override { return inner_->host_accessible(); }

  Result<DeviceBuffer> allocate(size_t bytes) override {
    if (capturing_) return refuse("allocate");
    return inner_->allocate(bytes);
  }
  Result<void> upload(DeviceBuffer& dst, size_t off, const void* src, size_t bytes) override {
    if (capturing_) return refuse("upload");
    return inner_->upload(dst, off, src, bytes);
  }
  Result<void> download(const DeviceBuffer& src, size_t off, void* dst, size_t bytes) override {
    if (capturing_) return refuse("download");
    return inner_->download(src, off, dst, bytes);
  }
  void synchronize() override {
    if (capturing_) {
      broken_ = true;
      return;
    }
    inner_->synchronize();
  }
  Result<PinnedBuffer> allocate_pinned(size_t bytes) override {
    if (capturing_) return refuse("allocate_pinned");
    return inner_->allocate_pinned(bytes);
  }
  Result<void> upload_async(DeviceBuffer& dst, size_t off, const void* src, size_t bytes) override {
    if (capturing_) return refuse("upload_async");
    return inner_->upload_async(dst, off, src, bytes);
  }

  void embedding(const EmbeddingParams& p) override { op([this, p] { inner_->embedding(p); }); }
  void rms_norm(const RmsNormParams& p) override { op([this, p] { inner_->rms_norm(p); }); }
  void rope(const RopeParams& p) override { op([this, p] { inner_->rope(p); }); }
  void silu_mul(const SiluMulParams& p) override { op([this, p] { inner_->silu_mul(p); }); }
  void kv_cache_write(const KvCacheWriteParams& p) override {
    op([this, p] { inner_->kv_cache_write(p); });
  }
  void paged_attention(const PagedAttentionParams& p) override {
    ++attention_calls_;
    op([this, p] { inner_->paged_attention(p); });
  }
  void copy_blocks(const CopyBlocksParams& p) override {
    op([this, p] { inner_->copy_blocks(p); });
  }
  void sample(const SamplingParams& p) override { op([this, p] { inner_->sample(p); }); }
  Result<void> matmul(const MatmulParams& p) override {
    if (!capturing_) return inner_->matmul(p);
    recorded_.push_back([this, p] { return inner_->matmul(p); });
    return {};
  }

  Result<std::unique_ptr<OpGraph>> capture(const std::function<Result<void>()>& issue) override {
    if (refuse_captures_) return make_error("recording backend: captures refused (test)");
    capturing_ = true;
    broken_ = false;
    recorded_.clear();
    Result<void> issued = issue();
    capturing_ = false;
    if (!issued) return issued.error();
    if (broken_) return make_error("recording backend: a transfer or sync during capture");
    auto g = std::make_unique<Recorded>();
    g->ops = std::move(recorded_);
    g->epoch = epoch_;
    ++captures_;
    return std::unique_ptr<OpGraph>(std::move(g));
  }
  Result<void> replay(const OpGraph& graph) override {
    const auto* g = dynamic_cast<const Recorded*>(&graph);
    if (g == nullptr) return make_error("recording backend: not its graph");
    if (g->epoch != epoch_) return make_error("recording backend: stale graph");
    ++replays_;
    for (const auto& f : g->ops) {
      if (auto ok = f(); !ok) return ok;
    }
    return {};
  }

  // Test controls and counters.
  void invalidate_graphs() { ++epoch_; }  // as a CUDA scratch reallocation does
  void refuse_captures(bool on) { refuse_captures_ = on; }
  int captures() const { return captures_; }
  int replays() const { return replays_; }
  int attention_calls() const { return attention_calls_; }

 protected:
  void release(void*, size_t) noexcept override {}  // never owns a buffer

 private:
  struct Recorded final : OpGraph {
    std::vector<std::function<Result<void>()>> ops;
    int epoch = 0;
  };
  template <class F>
  void op(F f) {
    if (!capturing_) return f();
    recorded_.push_back([f] {
      f();
      return Result<void>{};
    });
  }
  Error refuse(const char* what) {
    broken_ = true;
    return make_error(std::string("recording backend: ") + what + " during capture");
  }

  std::unique_ptr<Backend> inner_;
  std::vector<std::function<Result<void>()>> recorded_;
  bool capturing_ = false, broken_ = false, refuse_captures_ = false;
  int epoch_ = 0, captures_ = 0, replays_ = 0, attention_calls_ = 0;
};

}  // namespace pagoda::gpu::test
