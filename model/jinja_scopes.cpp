// Static scope analysis, mirroring jinja2's idtracking.py (see FrameSymbols in
// jinja_parser.hpp). A frame's symbols are computed from its own statements
// (descending into `if` branches but not into nested frames); nested frames
// are then analyzed with the complete enclosing frame as parent, as jinja2's
// compiler does. This decides, for instance, that a loop body reading `x`
// sees the template's own `x` (undefined until assigned) when the template
// assigns `x` anywhere, rather than the render context's `x`.
#include <set>
#include <unordered_map>

#include "model/jinja_parser.hpp"

namespace pagoda::model::jinja {
namespace {

class Symbols {
 public:
  explicit Symbols(const Symbols* parent) : parent_(parent) {}

  bool has_ref(const std::string& n) const {
    return index_.count(n) > 0 || (parent_ && parent_->has_ref(n));
  }
  void load(const std::string& n) {
    if (!has_ref(n)) define(n, LoadKind::kResolve);
  }
  void store(const std::string& n) {
    stores_.insert(n);
    if (index_.count(n)) return;
    define(n, parent_ && parent_->has_ref(n) ? LoadKind::kAlias : LoadKind::kUndefined);
  }
  void param(const std::string& n) {
    stores_.insert(n);
    define(n, LoadKind::kParam);
  }
  // Merges the symbols of alternative branches (copies of *this).
  void branch_update(const std::vector<Symbols>& branches) {
    std::set<std::string> new_stores;
    for (const Symbols& b : branches) new_stores.insert(b.stores_.begin(), b.stores_.end());
    for (const std::string& n : stores_) new_stores.erase(n);
    for (const Symbols& b : branches) {
      for (const auto& [name, kind] : b.slots_) define(name, kind);
      stores_.insert(b.stores_.begin(), b.stores_.end());
    }
    for (const std::string& n : new_stores) {
      define(n, parent_ && parent_->has_ref(n) ? LoadKind::kAlias : LoadKind::kResolve);
    }
  }
  FrameSymbols result() const { return FrameSymbols{slots_}; }

 private:
  void define(const std::string& n, LoadKind kind) {
    const auto it = index_.find(n);
    if (it != index_.end()) {
      slots_[it->second].second = kind;
      return;
    }
    index_.emplace(n, slots_.size());
    slots_.emplace_back(n, kind);
  }

  const Symbols* parent_;
  std::vector<std::pair<std::string, LoadKind>> slots_;
  std::unordered_map<std::string, size_t> index_;
  std::set<std::string> stores_;
};

void visit_expr(const Expr* e, Symbols& s) {
  if (!e) return;
  if (e->kind == ExprKind::kName) s.load(e->name);
  for (const auto& a : e->args) visit_expr(a.get(), s);
  for (const auto& kw : e->kwargs) visit_expr(kw.second.get(), s);
}

void visit_body(const Body& body, Symbols& s);

// jinja2's FrameSymbolVisitor.visit_If for one `if`/`elif` and what follows.
void visit_if(const Stmt& st, size_t branch, Symbols& s) {
  visit_expr(st.branches[branch].cond.get(), s);
  Symbols body = s;
  visit_body(st.branches[branch].body, body);
  Symbols elifs = s;
  Symbols els = s;
  if (branch == 0) {
    for (size_t i = 1; i < st.branches.size(); ++i) visit_if(st, i, elifs);
    visit_body(st.else_body, els);
  }
  s.branch_update({body, elifs, els});
}

void visit_stmt(const Stmt& st, Symbols& s) {
  switch (st.kind) {
    case StmtKind::kOutput:
      for (const auto& e : st.exprs) visit_expr(e.get(), s);
      break;
    case StmtKind::kIf: visit_if(st, 0, s); break;
    case StmtKind::kFor: visit_expr(st.expr.get(), s); break;
    case StmtKind::kSet:
      visit_expr(st.expr.get(), s);
      if (!st.target.attr.empty()) {
        s.load(st.target.names[0]);
      } else {
        for (const auto& n : st.target.names) s.store(n);
      }
      break;
    case StmtKind::kSetBlock: s.store(st.target.names[0]); break;
    case StmtKind::kMacro: s.store(st.name); break;
    case StmtKind::kFilterBlock: visit_expr(st.expr.get(), s); break;
    default: break;
  }
}

void visit_body(const Body& body, Symbols& s) {
  for (const auto& st : body) visit_stmt(*st, s);
}

void analyze_nested(Body& body, const Symbols& frame);

FrameSymbols analyze_frame(Body& body, const Symbols& sym) {
  analyze_nested(body, sym);
  return sym.result();
}

// Computes the frames of the statements nested in `body` (through `if`
// branches) whose enclosing frame is `frame`.
void analyze_nested(Body& body, const Symbols& frame) {
  for (auto& st : body) {
    Stmt& s = *st;
    switch (s.kind) {
      case StmtKind::kIf:
        for (auto& br : s.branches) analyze_nested(br.body, frame);
        analyze_nested(s.else_body, frame);
        break;
      case StmtKind::kFor: {
        Symbols loop(&frame);
        loop.param("loop");
        for (const auto& n : s.target.names) loop.param(n);
        visit_body(s.body, loop);
        s.frame = analyze_frame(s.body, loop);
        Symbols els(&frame);
        visit_body(s.else_body, els);
        s.else_frame = analyze_frame(s.else_body, els);
        Symbols test(&frame);
        for (const auto& n : s.target.names) test.param(n);
        visit_expr(s.cond.get(), test);
        s.test_frame = test.result();
        break;
      }
      case StmtKind::kMacro: {
        Symbols m(&frame);
        for (const auto& p : s.params) m.param(p);
        for (const auto& d : s.defaults) visit_expr(d.get(), m);
        visit_body(s.body, m);
        s.frame = analyze_frame(s.body, m);
        break;
      }
      case StmtKind::kFilterBlock:
      case StmtKind::kSetBlock:
      case StmtKind::kGeneration: {
        Symbols inner(&frame);
        visit_body(s.body, inner);
        visit_expr(s.expr.get(), inner);  // the filter runs in the block's frame
        s.frame = analyze_frame(s.body, inner);
        break;
      }
      default: break;
    }
  }
}

}  // namespace

void analyze_scopes(Template& t) {
  Symbols root(nullptr);
  visit_body(t.body, root);
  t.frame = analyze_frame(t.body, root);
}

}  // namespace pagoda::model::jinja
