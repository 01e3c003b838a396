// SeqMirror (actors/seq_mirror.hpp) without an executor: placeholders are
// listed with the id sampled last, and after expect() the next step's
// begin() may run before this step's record() (the order a pipelined
// executor would use: step N+1 prepared while N computes, its placeholder
// patched once N's id is known) and leaves the same token counts, last ids
// and history as the plain order. A placeholder of a sequence that never
// sampled fails alone, expect() or not.
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
  EXPECT_TRUE(s2.placeholders[1].resolved);
  EXPECT_EQ(s2.tokens[0], std::vector<TokenId>{42});
  EXPECT_EQ(s2.tokens[1], std::vector<TokenId>{43});
}

// Plain order: begin, forks, record per step. Pipelined: forks and expect,
// then step k + 1's begin() before step k's record(), its placeholders
// (unresolved) patched afterwards.
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
  piped.expect(plans[0]);
  for (size_t k = 1; k < plans.size(); ++k) {
    begin(piped, plans[k], b[k]);  // step k - 1 still "computing"
    piped.record(plans[k - 1], ids[k - 1]);
    ASSERT_EQ(b[k].placeholders.size(), 2u);
    for (const Placeholder& ph : b[k].placeholders) {  // the patch
      EXPECT_FALSE(ph.resolved);
      b[k].tokens[size_t(ph.entry)][size_t(ph.index)] = piped.find(ph.seq)->last_sampled;
    }
    piped.forks(plans[k], b[k].errors);
    piped.expect(plans[k]);
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

// The executor's order when it prepares ahead: step k + 1 is begun (and
// expects its own samples) while step k runs, and step k's record() comes
// after that: the record of step k must not end the wait for step k + 1's
// ids, so step k + 2's placeholders, begun before k + 1 records, are still
// unresolved and name k + 1 as the step they await.
TEST(SeqMirror, ARecordDoesNotEndTheWaitForALaterStepsIds) {
  SeqMirror m(kBlocks, kBlockSize);
  const StepPlan p1 = prefill_plan(1, {1, 2});
  const StepPlan p2 = decode_plan(2, {1, 2}, 5), p3 = decode_plan(3, {1, 2}, 6);
  Step s1, s2, s3;
  begin(m, p1, s1);
  m.forks(p1, s1.errors);
  m.expect(p1);
  begin(m, p2, s2);  // step 1 still computing
  m.forks(p2, s2.errors);
  m.expect(p2);
  m.record(p1, std::vector<TokenId>{42, 43});
  for (const Placeholder& ph : s2.placeholders) {
    EXPECT_FALSE(ph.resolved);
    EXPECT_EQ(ph.awaits, 1u);
    EXPECT_EQ(m.find(ph.seq)->recorded_step, 1u);  // step 2's launch may patch it now
  }
  begin(m, p3, s3);  // step 2 computing: its ids are still awaited
  ASSERT_EQ(s3.placeholders.size(), 2u);
  for (const Placeholder& ph : s3.placeholders) {
    EXPECT_FALSE(ph.resolved) << "seq " << ph.seq << " took step 1's id for step 2's";
    EXPECT_EQ(ph.awaits, 2u);
  }
  m.record(p2, std::vector<TokenId>{50, 51});
  EXPECT_EQ(m.find(1)->recorded_step, 2u);
  EXPECT_EQ(m.find(1)->last_sampled, 50);
  EXPECT_EQ(m.find(2)->last_sampled, 51);
}

TEST(SeqMirror, APlaceholderOfASequenceThatNeverSampledFailsAlone) {
  SeqMirror m(kBlocks, kBlockSize);
  Step s1, s2;
  StepPlan p1 = prefill_plan(1, {1, 2});
  p1.samples.clear();  // a prompt chunk: nothing sampled
  begin(m, p1, s1);
  m.forks(p1, s1.errors);
  m.expect(p1);
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

// One owner of each table (the TableStore) and one fork for both kinds: a
// pre-fork (beams) and a post-entry fork (n > 1) each give the child its own
// row holding the parent's table (or the fork's own table); a copy-on-write
// delta on the child leaves the parent's table alone.
TEST(SeqMirror, ForksCopyTheParentsTableIntoTheChildsOwnRow) {
  VectorTables tables(kBlocks);
  SeqMirror m(kBlocks, kBlockSize, &tables);
  Step s1, s2;
  StepPlan p1 = prefill_plan(1, {1});
  p1.forks.push_back({1, 5, {}});                         // n > 1: shares the prompt's table
  p1.samples.push_back(sample_of(5, 0));
  begin(m, p1, s1);
  end(m, p1, s1, {42, 43});
  ASSERT_TRUE(s1.errors.empty());
  EXPECT_NE(m.find(5)->row, m.find(1)->row);
  EXPECT_EQ(std::vector<BlockId>(m.table(5).begin(), m.table(5).end()),
            (std::vector<BlockId>{2, 3}));
  StepPlan p2 = decode_plan(2, {5}, 5);
  p2.pre_forks.push_back({1, 6, {}});                     // a beam fork of sequence 1
  p2.pre_forks.push_back({1, 7, {2, 9}});                 // with a table of its own
  p2.entries[0].table_from = 1;                           // copy-on-write of block 3
  p2.entries[0].new_blocks = {11};
  begin(m, p2, s2);
  EXPECT_EQ(std::vector<BlockId>(m.table(5).begin(), m.table(5).end()),
            (std::vector<BlockId>{2, 11}));
  EXPECT_EQ(std::vector<BlockId>(m.table(1).begin(), m.table(1).end()),
            (std::vector<BlockId>{2, 3}));
  EXPECT_EQ(std::vector<BlockId>(m.table(6).begin(), m.table(6).end()),
            (std::vector<BlockId>{2, 3}));
  EXPECT_EQ(std::vector<BlockId>(m.table(7).begin(), m.table(7).end()),
            (std::vector<BlockId>{2, 9}));
  EXPECT_EQ(m.find(6)->last_sampled, 42);
  EXPECT_EQ(s2.tokens[0], std::vector<TokenId>{43});
  m.erase(6);
  EXPECT_TRUE(m.table(6).empty());
  EXPECT_EQ(tables.row(m.find(7)->row).size(), 2u);
}

}  // namespace
}  // namespace pagoda::actors
