// The Executor under faults, on the real model (CPU, quantized), with plans
// built here: a row that fails alone (its mirror disagrees with the plan,
// its logits hold a NaN, its sampled id is outside the vocabulary) is named
// in StepResult::errors while the other row's token equals the one a clean
// executor computes without the failing row; an exception inside a step
// fails it and the step planned on top of it is skipped (never run on the
// stale placeholders the failed step left).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "actors/executor.hpp"
#include "formats_test_util.hpp"
#include "row_fault_backend.hpp"

namespace pagoda::actors {
namespace {

using gpu::test::RowFault;
using gpu::test::RowFaultBackend;

ExecutorOptions options(const std::string& path, std::function<RowFault(uint64_t, int32_t)> fault) {
  ExecutorOptions o;
  o.model_path = path;
  o.backend = gpu::BackendKind::kCpu;
  o.precision = model::WeightPrecision::kQuantized;
  o.num_blocks = 32;
  o.block_size = 16;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 128;
  o.max_model_len = 256;
  // Every executor here runs through the wrapper (same kernels), faulty or not.
  o.wrap_backend = [fault](std::unique_ptr<gpu::Backend> inner) -> std::unique_ptr<gpu::Backend> {
    return std::make_unique<RowFaultBackend>(std::move(inner), fault);
  };
  return o;
}

std::unique_ptr<Executor> make(const std::string& path, std::function<RowFault(uint64_t, int32_t)> fault = {}) {
  auto ex = Executor::create(options(path, std::move(fault)));
  EXPECT_TRUE(ex.ok()) << ex.error().message;
  return ex.ok() ? std::move(ex).value() : nullptr;
}

std::vector<TokenId> prompt(int32_t len, int32_t salt) {
  std::vector<TokenId> p;
  for (int32_t i = 0; i < len; ++i) p.push_back(100 + (i * 37 + salt * 101) % 5000);
  return p;
}

PlanSample greedy_sample(SeqId seq, int32_t entry) {
  PlanSample s;
  s.seq = seq;
  s.entry = entry;
  s.params.temperature = 0.0f;
  s.params.seed = 1;
  return s;
}

// Sequence `seq` in blocks {2 seq - 2, 2 seq - 1}: a fresh 20-token prompt.
PlanEntry prefill(SeqId seq) {
  PlanEntry e;
  e.seq = seq;
  e.tokens = prompt(20, int32_t(seq));
  e.fresh = true;
  e.new_blocks = {BlockId(2 * seq - 2), BlockId(2 * seq - 1)};
  e.prompt_len = 20;
  return e;
}

// One decode token at position num_cached (a known id, or the placeholder).
PlanEntry decode(SeqId seq, int32_t num_cached, TokenId known) {
  PlanEntry e;
  e.seq = seq;
  e.num_cached = num_cached;
  e.table_from = 2;
  if (known >= 0) {
    e.tokens = {known};
  } else {
    e.num_placeholders = 1;
  }
  return e;
}

StepPlan plan_of(uint64_t id, uint64_t depends_on, std::vector<PlanEntry> entries) {
  StepPlan p;
  p.step_id = id;
  p.depends_on = depends_on;
  p.entries = std::move(entries);
  for (size_t i = 0; i < p.entries.size(); ++i) p.samples.push_back(greedy_sample(p.entries[i].seq, int32_t(i)));
  return p;
}

// The reference: sequence 1 alone (prefill, then `decodes` placeholder decodes).
std::vector<TokenId> alone(const std::string& path, int decodes) {
  auto ex = make(path);
  std::vector<TokenId> out;
  if (!ex) return out;
  auto r = ex->run(plan_of(1, 0, {prefill(1)}));
  EXPECT_TRUE(r.ok());
  out.push_back(r->samples[0].token);
  for (int i = 0; i < decodes; ++i) {
    auto d = ex->run(plan_of(2 + i, 1 + i, {decode(1, 20 + i, -1)}));
    EXPECT_TRUE(d.ok());
    out.push_back(d->samples[0].token);
  }
  return out;
}

// Sequence 2's entry claims 19 cached tokens (the mirror holds 20): only its
// row fails; sequence 1 decodes as alone. The plan after it (one step
// ahead: placeholders) names sequence 2 again: "unknown", alone again.
TEST(ExecutorFaults, AMirrorMismatchFailsOnlyItsRow) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::vector<TokenId> ref = alone(path, 2);
  auto ex = make(path);
  ASSERT_TRUE(ex);
  auto r1 = ex->run(plan_of(1, 0, {prefill(1), prefill(2)}));
  ASSERT_TRUE(r1.ok()) << r1.error().message;
  EXPECT_TRUE(r1->errors.empty());
  EXPECT_EQ(r1->samples[0].token, ref[0]);
  auto r2 = ex->run(plan_of(2, 1, {decode(1, 20, -1), decode(2, 19, -1)}));
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  ASSERT_EQ(r2->errors.size(), 1u);
  EXPECT_EQ(r2->errors[0].seq, SeqId(2));
  EXPECT_NE(r2->errors[0].error.find("the plan says 19"), std::string::npos) << r2->errors[0].error;
  ASSERT_EQ(r2->samples.size(), 2u);
  EXPECT_EQ(r2->samples[0].token, ref[1]);
  EXPECT_EQ(r2->samples[1].token, -1);
  auto r3 = ex->run(plan_of(3, 2, {decode(1, 21, -1), decode(2, 20, -1)}));
  ASSERT_TRUE(r3.ok()) << r3.error().message;
  ASSERT_EQ(r3->errors.size(), 1u);
  EXPECT_EQ(r3->errors[0].seq, SeqId(2));
  EXPECT_EQ(r3->samples[0].token, ref[2]);
  EXPECT_EQ(ex->num_sequences(), 1u);
}

// A NaN in sequence 2's logits row (row 1 of the 2nd sample call), then an
// id outside the vocabulary for sequence 1's row (row 0 of the 3rd call,
// where sequence 1 decodes with sequence 3): each time only that row fails.
TEST(ExecutorFaults, NonFiniteLogitsOrAnOutOfRangeIdFailOnlyTheirRow) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::vector<TokenId> ref = alone(path, 1);
  auto ex = make(path, [](uint64_t call, int32_t) {
    RowFault f;
    if (call == 1) f.row = 1, f.nan_logits = true;
    if (call == 2) f.row = 0;
    return f;
  });
  ASSERT_TRUE(ex);
  auto r1 = ex->run(plan_of(1, 0, {prefill(1), prefill(2)}));
  ASSERT_TRUE(r1.ok()) << r1.error().message;
  ASSERT_EQ(r1->errors.size(), 1u);
  EXPECT_EQ(r1->errors[0].seq, SeqId(2));
  EXPECT_NE(r1->errors[0].error.find("non-finite"), std::string::npos) << r1->errors[0].error;
  EXPECT_EQ(r1->samples[0].token, ref[0]);
  EXPECT_EQ(r1->samples[1].token, -1);
  auto r2 = ex->run(plan_of(2, 1, {decode(1, 20, -1), prefill(3)}));
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  ASSERT_EQ(r2->errors.size(), 1u);
  EXPECT_EQ(r2->errors[0].seq, SeqId(1));
  EXPECT_NE(r2->errors[0].error.find("outside the vocabulary"), std::string::npos) << r2->errors[0].error;
  EXPECT_EQ(r2->samples[0].token, -1);
  EXPECT_GE(r2->samples[1].token, 0);
  EXPECT_LT(r2->samples[1].token, ex->config().vocab_size);
  EXPECT_EQ(ex->num_sequences(), 1u);  // only sequence 3 is left
}

// An exception inside step 2 (after the mirror took its deltas) fails it;
// step 3, planned on top of it with a placeholder, is skipped, and step 4
// (a fresh start, as the scheduler recomputes) runs as alone.
TEST(ExecutorFaults, AnExceptionInAStepSkipsTheStepPlannedOnIt) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  const std::vector<TokenId> ref = alone(path, 0);
  auto ex = make(path);
  ASSERT_TRUE(ex);
  ASSERT_TRUE(ex->run(plan_of(1, 0, {prefill(1)})).ok());
  auto r2 = ex->run(plan_of(2, 1, {decode(1, 20, -1)}), [] { throw std::runtime_error("boom"); });
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find("boom"), std::string::npos) << r2.error().message;
  StepPlan p3 = plan_of(3, 2, {decode(1, 21, -1)});
  auto r3 = ex->run(p3);
  ASSERT_TRUE(r3.ok()) << r3.error().message;
  EXPECT_TRUE(r3->skipped);
  StepPlan p4 = plan_of(4, 0, {prefill(1)});
  p4.releases = {1};
  auto r4 = ex->run(p4);
  ASSERT_TRUE(r4.ok()) << r4.error().message;
  EXPECT_FALSE(r4->skipped);
  EXPECT_EQ(r4->samples[0].token, ref[0]);
}

}  // namespace
}  // namespace pagoda::actors
