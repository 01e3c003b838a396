// ConstraintBook (actors/constraint_book.hpp) on plans built by hand, with
// the real SmolLM2 vocabulary and a regex grammar: a fresh entry restores
// its matcher from prefix + recomputed ids, sampled ids are accepted by the
// next prepare(), a different id at an accepted position rolls back, pre-fork
// children are tracked from their first plan, releases drop matchers, a
// rejected id fails its sequence alone, and a finished grammar masks all but
// EOS and ignores the ids after it. Speculative entries (issue 24): each
// drafted row's mask is the matcher's after the drafts before it, a draft the
// grammar forbids is masked out at its own row, a drafted EOS gives the rows
// after it the EOS-only mask, and the verified run that follows rolls back
// the walked drafts it did not keep.
#include <gtest/gtest.h>

#include <filesystem>

#include "actors/constraint_book.hpp"
#include "model/gguf_file.hpp"
#include "model/grammar_vocab.hpp"
#include "tests/tokenizer_golden_util.hpp"

namespace pagoda::actors {
namespace {

class ConstraintBookTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = model::test::smollm2_path();
    if (!std::filesystem::exists(path)) return;
    auto gguf = model::GgufFile::open(path);
    ASSERT_TRUE(gguf.ok());
    tok_ = *model::Tokenizer::from_gguf(*gguf);
    auto info = model::grammar_tokenizer_info(*tok_, tok_->vocab_size(), {tok_->eos_id()});
    ASSERT_TRUE(info.ok());
    model::GrammarCompiler c(*info);
    auto g = c.compile({model::GrammarKind::regex, "(abc|xyz)+", {}, false});
    ASSERT_TRUE(g.ok());
    auto p = std::make_shared<model::ConstraintProgram>();
    p->grammar = *g;
    p->vocab = tok_->vocab_size();
    p->stop_ids = {tok_->eos_id()};
    p->finish();
    prog_ = p;
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "SmolLM2 GGUF not found";
    abc_ = tok_->encode("abc", false).at(0);
    xyz_ = tok_->encode("xyz", false).at(0);
    ASSERT_EQ(tok_->encode("abc", false).size(), 1u);
    ASSERT_EQ(tok_->encode("xyz", false).size(), 1u);
  }
  // One entry of seq computing `ids` at num_cached, sampling after them.
  static StepPlan step(SeqId seq, int32_t num_cached, std::vector<TokenId> ids, bool fresh = false,
                       std::vector<TokenId> prefix = {}) {
    StepPlan p;
    PlanEntry e;
    e.seq = seq;
    e.tokens = std::move(ids);
    e.num_cached = num_cached;
    e.fresh = fresh;
    e.prompt_len = 3;
    e.prefix = std::move(prefix);
    if (fresh) e.constraint = prog_;
    p.entries.push_back(e);
    p.samples.push_back({seq, 0, {}, false, {}});
    return p;
  }
  // The same entry ending with `drafts` drafted ids: its drafts + 1 rows are sampled.
  static StepPlan speculative_step(SeqId seq, int32_t num_cached, std::vector<TokenId> ids,
                                   const std::vector<TokenId>& drafts) {
    ids.insert(ids.end(), drafts.begin(), drafts.end());
    StepPlan p = step(seq, num_cached, std::move(ids));
    p.samples.clear();
    for (int32_t j = 0; j <= int32_t(drafts.size()); ++j) {
      PlanSample ps{seq, 0, {}, false, {}};
      ps.row_back = int32_t(drafts.size()) - j;
      p.samples.push_back(ps);
    }
    return p;
  }
  bool allows(ConstraintBook& b, SeqId seq, int32_t id, int32_t row_back = 0) {
    const RowConstraint rc = b.row(seq, row_back);
    if (rc.mask < 0) return true;
    return (b.mask(rc.mask)[id >> 5] >> (id & 31)) & 1u;
  }
  void run(ConstraintBook& b, const StepPlan& p) {
    std::vector<std::vector<TokenId>> tokens;
    for (const PlanEntry& e : p.entries) tokens.push_back(e.tokens);
    b.stage(p, tokens, std::vector<uint8_t>(p.entries.size(), 0));
    b.prepare();
  }
  static inline std::shared_ptr<const model::Tokenizer> tok_;
  static inline std::shared_ptr<const model::ConstraintProgram> prog_;
  int32_t abc_ = 0, xyz_ = 0;
};

TEST_F(ConstraintBookTest, RestoresFromPrefixAndFollowsSamples) {
  ConstraintBook b;
  // Re-admitted after preemption: 3 prompt ids + "abc" cached, "xyz" recomputed.
  StepPlan p = step(1, 4, {xyz_}, true, {7, 8, 9, abc_});
  run(b, p);
  ASSERT_TRUE(b.errors().empty());
  ASSERT_NE(b.find(1), nullptr);
  EXPECT_EQ(b.find(1)->num_accepted(), 2);
  EXPECT_TRUE(allows(b, 1, abc_));
  EXPECT_TRUE(allows(b, 1, tok_->eos_id()));
  EXPECT_FALSE(allows(b, 1, tok_->encode("q", false).at(0)));
  const TokenId sampled[] = {abc_};
  b.record(p, sampled);
  run(b, step(1, 5, {abc_}));  // the placeholder: the id just sampled, accepted once
  EXPECT_EQ(b.find(1)->num_accepted(), 3);
  run(b, step(1, 5, {xyz_}));  // another id at output position 2: rolled back, then taken
  ASSERT_TRUE(b.errors().empty());
  EXPECT_EQ(b.find(1)->history().back(), xyz_);
  EXPECT_EQ(b.find(1)->num_accepted(), 3);
}

TEST_F(ConstraintBookTest, PreForkChildrenReleasesAndErrors) {
  ConstraintBook b;
  run(b, step(1, 0, {7, 8, 9}, true, {}));
  StepPlan p = step(1, 3, {abc_});
  p.pre_forks.push_back({1, 2, {}});
  PlanEntry child = p.entries[0];
  child.seq = 2;
  child.tokens = {xyz_};
  p.entries.push_back(child);
  p.samples.push_back({2, 1, {}, false, {}});
  run(b, p);
  ASSERT_TRUE(b.errors().empty());
  ASSERT_NE(b.find(2), nullptr);
  EXPECT_EQ(b.find(2)->history(), std::vector<int32_t>{xyz_}) << "the child's own entry reached its matcher";
  EXPECT_EQ(b.find(1)->history(), std::vector<int32_t>{abc_});
  StepPlan bad = step(1, 4, {tok_->encode("q", false).at(0)});
  bad.releases = {2};
  run(b, bad);
  EXPECT_EQ(b.find(2), nullptr);
  ASSERT_EQ(b.errors().size(), 1u);
  EXPECT_EQ(b.errors()[0].seq, 1u);
  EXPECT_EQ(b.row(1).mask, -1) << "a failed sequence gets no mask";
}

TEST_F(ConstraintBookTest, FinishedGrammarAllowsOnlyEosAndIgnoresLaterIds) {
  ConstraintBook b;
  StepPlan p = step(1, 0, {7, 8, 9, abc_}, true, {});
  run(b, p);
  const TokenId eos[] = {tok_->eos_id()};
  b.record(p, eos);
  StepPlan next = step(1, 5, {});
  run(b, next);
  EXPECT_TRUE(b.find(1)->terminated());
  EXPECT_TRUE(allows(b, 1, tok_->eos_id()));
  EXPECT_FALSE(allows(b, 1, abc_));
  const TokenId more[] = {abc_};
  b.record(next, more);  // planned ahead before the scheduler saw EOS
  run(b, step(1, 6, {}));
  EXPECT_TRUE(b.errors().empty());
}

TEST_F(ConstraintBookTest, SpeculativeRowsFollowTheDraftsAndTheVerifiedRunRollsBack) {
  ConstraintBook b;
  run(b, step(1, 0, {7, 8, 9}, true, {}));  // prompt of 3; the first row after it
  const TokenId q = tok_->encode("q", false).at(0);
  const TokenId eos = tok_->eos_id();
  // Committed abc, drafts xyz, q (forbidden), abc: rows j = 0..3 (row_back 3..0).
  StepPlan p = speculative_step(1, 3, {abc_}, {xyz_, q, abc_});
  run(b, p);
  ASSERT_TRUE(b.errors().empty()) << "a forbidden draft is a rejection, not an error";
  for (int32_t rb = 3; rb >= 0; --rb) {  // after "abc", "abcxyz", then the walk stops at q
    EXPECT_TRUE(allows(b, 1, abc_, rb)) << rb;
    EXPECT_TRUE(allows(b, 1, eos, rb)) << rb;
    EXPECT_FALSE(allows(b, 1, q, rb)) << "q is masked out at its own row " << rb;
  }
  EXPECT_EQ(b.find(1)->history(), (std::vector<TokenId>{abc_, xyz_})) << "the walked drafts";
  const TokenId verified[] = {xyz_, abc_, abc_, abc_};  // s[0] = d[0] kept, s[1] != q
  b.record(p, verified);  // skipped: the next plan carries the run
  // The verified run: abc (committed), xyz (kept draft), then s[1] = abc.
  run(b, speculative_step(1, 5, {abc_}, {abc_, xyz_}));
  ASSERT_TRUE(b.errors().empty()) << (b.errors().empty() ? "" : b.errors()[0].error);
  EXPECT_EQ(b.find(1)->history(), (std::vector<TokenId>{abc_, xyz_, abc_, abc_, xyz_}));
  // Verification keeps none of these drafts: s[0] = xyz. The walk is rolled back.
  run(b, step(1, 6, {xyz_}));
  ASSERT_TRUE(b.errors().empty()) << (b.errors().empty() ? "" : b.errors()[0].error);
  EXPECT_EQ(b.find(1)->history(), (std::vector<TokenId>{abc_, xyz_, abc_, xyz_}));
  EXPECT_FALSE(b.find(1)->terminated());
}

TEST_F(ConstraintBookTest, ADraftedEosLeavesOnlyEosForTheRowsAfterIt) {
  ConstraintBook b;
  run(b, step(1, 0, {7, 8, 9}, true, {}));
  const TokenId eos = tok_->eos_id();
  StepPlan p = speculative_step(1, 3, {abc_}, {eos, abc_});
  run(b, p);
  ASSERT_TRUE(b.errors().empty());
  EXPECT_TRUE(allows(b, 1, abc_, 2));  // row 0: after "abc"
  EXPECT_TRUE(allows(b, 1, eos, 2));
  EXPECT_FALSE(allows(b, 1, abc_, 1)) << "row 1 follows an EOS";
  EXPECT_TRUE(allows(b, 1, eos, 1));
  EXPECT_FALSE(b.find(1)->terminated()) << "a drafted EOS is never accepted tentatively";
  // EOS rejected (s[0] = xyz): the matcher goes on normally.
  run(b, step(1, 4, {xyz_}));
  ASSERT_TRUE(b.errors().empty());
  EXPECT_FALSE(b.find(1)->terminated());
  EXPECT_TRUE(allows(b, 1, abc_));
}

}  // namespace
}  // namespace pagoda::actors
