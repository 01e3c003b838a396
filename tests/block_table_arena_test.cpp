// BlockTableArena (model/block_table_arena.hpp) on the CPU backend: row
// acquire/release/reuse and exhaustion, assign's validation (a rejected
// assign changes nothing), and sync uploading exactly the dirty ranges, one
// upload per dirty row, checked by reading the device memory (host-accessible
// on the CPU backend) after poisoning it and by counting the uploads.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cpu/cpu_backend.hpp"
#include "model/block_table_arena.hpp"

namespace pagoda {
namespace {

using model::BlockTableArena;

constexpr int32_t kPoison = -77;

// A CPU backend that records every upload (byte offset, bytes).
class CountingBackend final : public gpu::Backend {
 public:
  gpu::BackendKind kind() const override { return gpu::BackendKind::kCpu; }
  std::string_view name() const override { return "counting-cpu"; }
  bool host_accessible() const override { return true; }
  Result<gpu::DeviceBuffer> allocate(size_t bytes) override { return cpu_.allocate(bytes); }
  Result<void> upload(gpu::DeviceBuffer& dst, size_t off, const void* src, size_t n) override {
    uploads.emplace_back(off, n);
    return cpu_.upload(dst, off, src, n);
  }
  Result<void> download(const gpu::DeviceBuffer& src, size_t off, void* dst, size_t n) override {
    return cpu_.download(src, off, dst, n);
  }
  void synchronize() override {}
  void embedding(const gpu::EmbeddingParams&) override {}
  void rms_norm(const gpu::RmsNormParams&) override {}
  void rope(const gpu::RopeParams&) override {}
  void silu_mul(const gpu::SiluMulParams&) override {}
  void kv_cache_write(const gpu::KvCacheWriteParams&) override {}
  void paged_attention(const gpu::PagedAttentionParams&) override {}
  void copy_blocks(const gpu::CopyBlocksParams&) override {}
  void sample(const gpu::SamplingParams&) override {}
  Result<void> matmul(const gpu::MatmulParams&) override { return make_error("unused"); }

  std::vector<std::pair<size_t, size_t>> uploads;

 protected:
  void release(void*, size_t) noexcept override {}  // buffers belong to cpu_

 private:
  gpu::cpu::CpuBackend cpu_{gpu::BackendOptions{0, 1}};
};

BlockTableArena make(gpu::Backend& be, int32_t rows, int32_t width, int32_t blocks) {
  auto a = BlockTableArena::create(be, rows, width, blocks);
  EXPECT_TRUE(a.ok()) << a.error().message;
  return std::move(a).value();
}

// The whole device table [rows, width], read directly (host-accessible backend).
std::vector<int32_t> device_table(const BlockTableArena& a) {
  return std::vector<int32_t>(a.device(), a.device() + size_t(a.rows()) * size_t(a.width()));
}

void poison(BlockTableArena& a) {
  int32_t* d = const_cast<int32_t*>(a.device());  // CPU backend: plain host memory
  std::fill_n(d, size_t(a.rows()) * size_t(a.width()), kPoison);
}

std::vector<int32_t> row_of(const BlockTableArena& a, int32_t row) {
  const auto r = a.host_row(row);
  return std::vector<int32_t>(r.begin(), r.end());
}

TEST(BlockTableArena, CreateRejectsEmptyShapes) {
  CountingBackend be;
  EXPECT_FALSE(BlockTableArena::create(be, 0, 4, 8).ok());
  EXPECT_FALSE(BlockTableArena::create(be, 2, 0, 8).ok());
  EXPECT_FALSE(BlockTableArena::create(be, 2, 4, 0).ok());
}

TEST(BlockTableArena, AcquireReleaseReuseAndExhaustion) {
  CountingBackend be;
  BlockTableArena a = make(be, 3, 4, 10);
  std::vector<int32_t> got;
  for (int i = 0; i < 3; ++i) {
    auto r = a.acquire();
    ASSERT_TRUE(r.ok()) << r.error().message;
    got.push_back(*r);
  }
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.free_rows(), 0);
  auto none = a.acquire();
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("in use"), std::string::npos) << none.error().message;

  ASSERT_TRUE(a.assign(1, 0, std::vector<int32_t>{4, 5}).ok());
  EXPECT_EQ(a.length(1), 2);
  a.release(1);
  EXPECT_FALSE(a.acquired(1));
  EXPECT_EQ(a.length(1), 0);
  EXPECT_TRUE(a.host_row(1).empty());
  EXPECT_FALSE(a.dirty()) << "a released row's pending change is dropped";
  a.release(2);
  auto again = a.acquire();  // last released first
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 2);
  auto next = a.acquire();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 1);
  EXPECT_EQ(a.length(1), 0) << "a reused row starts empty";
  EXPECT_FALSE(a.acquire().ok());
  EXPECT_FALSE(a.acquired(-1));
  EXPECT_FALSE(a.acquired(3));
}

TEST(BlockTableArena, RejectedAssignChangesNothing) {
  CountingBackend be;
  BlockTableArena a = make(be, 2, 4, 10);
  ASSERT_EQ(*a.acquire(), 0);
  ASSERT_TRUE(a.assign(0, 0, std::vector<int32_t>{3, 4}).ok());
  ASSERT_TRUE(a.sync(be).ok());
  be.uploads.clear();
  struct Case {
    int32_t row, from;
    std::vector<int32_t> blocks;
    const char* what;
  };
  const Case cases[] = {
      {0, 2, {5, 10}, "is not a block"},  // 10 == num_blocks (5 would be fine)
      {0, 1, {-1}, "is not a block"},
      {0, 3, {5}, "hole"},                // length 2: entry 2 unset
      {0, -1, {5}, "hole"},
      {0, 2, {5, 6, 7}, "width"},         // 2 + 3 > 4
      {1, 0, {5}, "not an acquired row"},
      {7, 0, {5}, "not an acquired row"},
  };
  for (const Case& c : cases) {
    auto r = a.assign(c.row, c.from, c.blocks);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.error().message.find(c.what), std::string::npos) << r.error().message;
    EXPECT_EQ(row_of(a, 0), (std::vector<int32_t>{3, 4})) << c.what;
    EXPECT_EQ(a.length(0), 2) << c.what;
    EXPECT_FALSE(a.dirty()) << c.what;
  }
  ASSERT_TRUE(a.sync(be).ok());
  EXPECT_TRUE(be.uploads.empty()) << "nothing to upload after rejected assigns";
  ASSERT_TRUE(a.assign(0, 2, std::vector<int32_t>{5, 9}).ok());  // the edges are allowed
  EXPECT_EQ(row_of(a, 0), (std::vector<int32_t>{3, 4, 5, 9}));
}

TEST(BlockTableArena, SyncUploadsExactlyTheDirtyRanges) {
  CountingBackend be;
  BlockTableArena a = make(be, 4, 8, 100);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.acquire().ok());
  ASSERT_TRUE(a.assign(0, 0, std::vector<int32_t>{1, 2, 3}).ok());
  ASSERT_TRUE(a.assign(2, 0, std::vector<int32_t>{5}).ok());
  ASSERT_TRUE(a.assign(2, 1, std::vector<int32_t>{6, 7}).ok());  // coalesces with [0, 1)
  EXPECT_TRUE(a.dirty());
  poison(a);
  ASSERT_TRUE(a.sync(be).ok());
  EXPECT_FALSE(a.dirty());
  std::vector<int32_t> want(4 * 8, kPoison);
  for (int i = 0; i < 3; ++i) want[size_t(i)] = 1 + i;       // row 0 [0, 3)
  for (int i = 0; i < 3; ++i) want[16 + size_t(i)] = 5 + i;  // row 2 [0, 3)
  EXPECT_EQ(device_table(a), want);
  ASSERT_EQ(be.uploads.size(), 2u) << "one upload per dirty row";
  auto sorted = be.uploads;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted[0], (std::pair<size_t, size_t>{0, 12}));
  EXPECT_EQ(sorted[1], (std::pair<size_t, size_t>{16 * 4, 12}));

  // Append one block and replace an earlier one (copy-on-write): the row's
  // range [1, 4) goes up in one upload; entry 0 and row 2 are not re-sent.
  poison(a);
  be.uploads.clear();
  ASSERT_TRUE(a.assign(0, 3, std::vector<int32_t>{4}).ok());
  ASSERT_TRUE(a.assign(0, 1, std::vector<int32_t>{9}).ok());
  EXPECT_EQ(row_of(a, 0), (std::vector<int32_t>{1, 9, 3, 4}));
  ASSERT_TRUE(a.sync(be).ok());
  std::vector<int32_t> want2(4 * 8, kPoison);
  want2[1] = 9;
  want2[2] = 3;
  want2[3] = 4;
  EXPECT_EQ(device_table(a), want2);
  ASSERT_EQ(be.uploads.size(), 1u);
  EXPECT_EQ(be.uploads[0], (std::pair<size_t, size_t>{4, 12}));

  be.uploads.clear();
  ASSERT_TRUE(a.sync(be).ok());  // clean: nothing
  EXPECT_TRUE(be.uploads.empty());
}

TEST(BlockTableArena, ForkCopiesAHostRowAndReleaseDropsPendingChanges) {
  CountingBackend be;
  BlockTableArena a = make(be, 3, 6, 50);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.acquire().ok());
  ASSERT_TRUE(a.assign(0, 0, std::vector<int32_t>{7, 8, 9}).ok());
  ASSERT_TRUE(a.assign(1, 0, a.host_row(0)).ok());  // a beam fork: the parent's table
  ASSERT_TRUE(a.assign(0, 0, a.host_row(0)).ok());  // onto itself: a no-op copy
  EXPECT_EQ(row_of(a, 1), (std::vector<int32_t>{7, 8, 9}));
  ASSERT_TRUE(a.assign(2, 0, std::vector<int32_t>{1}).ok());
  a.release(2);
  poison(a);
  ASSERT_TRUE(a.sync(be).ok());
  EXPECT_EQ(be.uploads.size(), 2u) << "rows 0 and 1; released row 2 is skipped";
  const std::vector<int32_t> dev = device_table(a);
  EXPECT_EQ(std::vector<int32_t>(dev.begin(), dev.begin() + 3), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(std::vector<int32_t>(dev.begin() + 6, dev.begin() + 9),
            (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(dev[12], kPoison);
}

// truncate(): a table delta that replaces a shorter tail (SeqMirror's
// TableStore contract); a longer length or a free row changes nothing.
TEST(BlockTableArena, TruncateShortensARowWithoutUploading) {
  CountingBackend be;
  BlockTableArena a = make(be, 2, 6, 50);
  const int32_t row = *a.acquire();
  ASSERT_TRUE(a.assign(row, 0, std::vector<int32_t>{4, 5, 6, 7}).ok());
  ASSERT_TRUE(a.sync(be).ok());
  const size_t uploads = be.uploads.size();
  a.truncate(row, 6);
  EXPECT_EQ(a.length(row), 4);
  a.truncate(row, 2);
  EXPECT_EQ(row_of(a, row), (std::vector<int32_t>{4, 5}));
  EXPECT_FALSE(a.dirty());
  EXPECT_EQ(be.uploads.size(), uploads);
  EXPECT_FALSE(a.assign(row, 3, std::vector<int32_t>{9}).ok()) << "a hole past the new length";
  ASSERT_TRUE(a.assign(row, 2, std::vector<int32_t>{9}).ok());
  EXPECT_EQ(row_of(a, row), (std::vector<int32_t>{4, 5, 9}));
  a.truncate(1, 0);  // not acquired: ignored
  EXPECT_EQ(a.length(1), 0);
}

TEST(BlockTableArena, SyncOnAnotherBackendIsAnErrorAndStaysDirty) {
  CountingBackend be, other;
  BlockTableArena a = make(be, 1, 2, 4);
  ASSERT_TRUE(a.acquire().ok());
  ASSERT_TRUE(a.assign(0, 0, std::vector<int32_t>{3}).ok());
  EXPECT_FALSE(a.sync(other).ok());
  EXPECT_TRUE(a.dirty());
  EXPECT_TRUE(other.uploads.empty());
  ASSERT_TRUE(a.sync(be).ok());
  EXPECT_FALSE(a.dirty());
  EXPECT_EQ(a.device()[0], 3);
}

}  // namespace
}  // namespace pagoda
