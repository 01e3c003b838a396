// SeqMirror (actors/seq_mirror.hpp) without an executor: placeholders are
// listed with the id sampled last, and the next step's begin() may run
// before this step's record() (the order a pipelined executor uses: step
// N+1 is prepared while N computes, its placeholder patched once N's id is
// known) and leaves the same token counts, last ids and history as the
// plain order. A placeholder of a sequence that never sampled fails alone.
#include <gtest/gtest.h>

#include <vector>

#include "actors/seq_mirror.hpp"

namespace pagoda::actors {
namespace {

constexpr int32_t kBlocks = 16, kBlockSize = 4;

PlanSample sample_of(SeqId seq, int32_t entry) {
  PlanSample s;
  s.seq = seq;
  s.entry = entry;
  return s;
}

// Sequence `seq` (blocks 2 seq, 2 seq + 1): a fresh 5-token prompt with its
// history (penalties), sampled.
StepPlan prefill_plan(uint64_t id, std::vector<SeqId> seqs) {
  StepPlan p;
  p.step_id = id;
  for (SeqId seq : seqs) {
    PlanEntry e;
    e.seq = seq;
    e.tokens = {TokenId(10 * seq), TokenId(10 * seq + 1), TokenId(10 * seq + 2),
                TokenId(10 * seq + 3), TokenId(10 * seq + 4)};
    e.fresh = true;
    e.new_blocks = {BlockId(2 * seq), BlockId(2 * seq + 1)};
    e.prompt_len = 5;
    p.entries.push_back(e);
    p.samples.push_back(sample_of(seq, int32_t(p.entries.size()) - 1));
  }
  return p;
}

// One placeholder decode per sequence at position `cached`.
StepPlan decode_plan(uint64_t id, std::vector<SeqId> seqs, int32_t cached) {
  StepPlan p;
  p.step_id = id;
  p.depends_on = id - 1;
  for (SeqId seq : seqs) {
    PlanEntry e;
    e.seq = seq;
    e.num_cached = cached;
    e.table_from = 2;
    e.num_placeholders = 1;
    p.entries.push_back(e);
    p.samples.push_back(sample_of(seq, int32_t(p.entries.size()) - 1));
  }
  return p;
}

struct Step {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<uint8_t> bad;
  std::vector<SeqError> errors;
  std::vector<Placeholder> placeholders;
};

void begin(SeqMirror& m, const StepPlan& p, Step& s) {
  m.begin(p, s.tokens, s.bad, s.errors, &s.placeholders);
  ASSERT_TRUE(s.errors.empty()) << s.errors[0].error;
}

void end(SeqMirror& m, const StepPlan& p, Step& s, std::vector<TokenId> sampled) {
  m.forks(p, s.errors);
  m.record(p, sampled);
}

TEST(SeqMirror, PlaceholdersAreListedWithTheIdSampledLast) {
  SeqMirror m(kBlocks, kBlockSize);
  Step s1, s2;
  const StepPlan p1 = prefill_plan(1, {1, 2});
  begin(m, p1, s1);
  EXPECT_TRUE(s1.placeholders.empty());
  m.forks(p1, s1.errors);
  m.record(p1, std::vector<TokenId>{42, 43});
  begin(m, decode_plan(2, {1, 2}, 5), s2);
  ASSERT_EQ(s2.placeholders.size(), 2u);
  EXPECT_EQ(s2.placeholders[1].entry, 1);
  EXPECT_EQ(s2.placeholders[1].index, 0);
  EXPECT_EQ(s2.placeholders[1].seq, SeqId(2));
  EXPECT_EQ(s2.placeholders[1].position, 5);
  EXPECT_EQ(s2.tokens[0], std::vector<TokenId>{42});
  EXPECT_EQ(s2.tokens[1], std::vector<TokenId>{43});
}

// Plain order: begin, forks, record per step. Pipelined: step k + 1's
// begin() before step k's record(), its placeholders patched afterwards.
TEST(SeqMirror, BeginningTheNextStepBeforeRecordingLeavesTheSameState) {
  const std::vector<std::vector<TokenId>> ids = {{42, 43}, {50, 51}, {60, 61}, {70, 71}};
  SeqMirror plain(kBlocks, kBlockSize), piped(kBlocks, kBlockSize);
  std::vector<StepPlan> plans = {prefill_plan(1, {1, 2})};
  for (int k = 1; k < 4; ++k) plans.push_back(decode_plan(uint64_t(k + 1), {1, 2}, 4 + k));
  std::vector<Step> a(plans.size()), b(plans.size());
  for (size_t k = 0; k < plans.size(); ++k) {
    begin(plain, plans[k], a[k]);
    end(plain, plans[k], a[k], ids[k]);
  }
  begin(piped, plans[0], b[0]);
  piped.forks(plans[0], b[0].errors);
  for (size_t k = 1; k < plans.size(); ++k) {
    begin(piped, plans[k], b[k]);  // step k - 1 still "computing"
    piped.record(plans[k - 1], ids[k - 1]);
    for (const Placeholder& ph : b[k].placeholders) {  // the patch
      b[k].tokens[size_t(ph.entry)][size_t(ph.index)] = piped.find(ph.seq)->last_sampled;
    }
    piped.forks(plans[k], b[k].errors);
    EXPECT_EQ(b[k].tokens, a[k].tokens) << "step " << k;
  }
  piped.record(plans.back(), ids.back());
  for (SeqId seq : {SeqId(1), SeqId(2)}) {
    const MirroredSeq* x = plain.find(seq);
    const MirroredSeq* y = piped.find(seq);
    ASSERT_TRUE(x != nullptr && y != nullptr);
    EXPECT_EQ(y->num_tokens, x->num_tokens);
    EXPECT_EQ(y->last_sampled, x->last_sampled);
    ASSERT_TRUE(x->history_valid && y->history_valid);
    EXPECT_EQ(y->history, x->history);
    EXPECT_EQ(x->history.size(), 9u);  // 5 prompt ids, 3 fed back, the last sample
    EXPECT_EQ(x->history[5], ids[0][seq - 1]);
  }
}

TEST(SeqMirror, APlaceholderOfASequenceThatNeverSampledFailsAlone) {
  SeqMirror m(kBlocks, kBlockSize);
  Step s1, s2;
  StepPlan p1 = prefill_plan(1, {1, 2});
  p1.samples.clear();  // a prompt chunk: nothing sampled
  begin(m, p1, s1);
  m.forks(p1, s1.errors);
  StepPlan p2 = decode_plan(2, {1, 2}, 5);
  p2.entries[1].num_placeholders = 0;
  p2.entries[1].tokens = {7};
  m.begin(p2, s2.tokens, s2.bad, s2.errors, &s2.placeholders);
  ASSERT_EQ(s2.errors.size(), 1u);
  EXPECT_EQ(s2.errors[0].seq, SeqId(1));
  EXPECT_EQ(s2.bad, (std::vector<uint8_t>{1, 0}));
  EXPECT_TRUE(s2.placeholders.empty());
  EXPECT_EQ(m.find(1), nullptr);
  EXPECT_EQ(m.find(2)->num_tokens, 6);
}

}  // namespace
}  // namespace pagoda::actors
