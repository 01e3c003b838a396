// Jinja parser: statements (see jinja_parser.hpp). Expressions are parsed in
// jinja_parse_expr.cpp; both share the ParserState declared in
// jinja_parse_state.hpp.
#include "model/jinja_parser.hpp"

#include "model/jinja_lexer.hpp"
#include "model/jinja_parse_state.hpp"

namespace pagoda::model::jinja {
namespace {

const char* const kUnsupportedStatements[] = {
    "extends", "include", "import", "from", "block", "with", "call", "autoescape", "do",
    "trans", "pluralize", "endtrans", "debug"};

class StatementParser : public ParserState {
 public:
  using ParserState::ParserState;
  Body subparse(std::initializer_list<const char*> end_names);

 private:
  std::unique_ptr<Stmt> parse_statement();
  std::unique_ptr<Stmt> make(StmtKind k) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = cur().line;
    return s;
  }
  // Block end of the current tag, the body up to one of `end_names`; leaves
  // the parser on that end name.
  bool body_until(Body& body, std::initializer_list<const char*> end_names) {
    if (!expect_block_end()) return false;
    body = subparse(end_names);
    return !failed();
  }
  bool expect_block_end() {
    if (cur().type == TokenType::kBlockEnd) { next(); return true; }
    fail("expected end of statement block, got " + describe(cur()));
    return false;
  }
  // Consumes `{% endX %}` (the parser stands on endX).
  bool finish(const char* end_name) {
    if (!is_name(end_name)) { fail(std::string("expected '") + end_name + "'"); return false; }
    next();
    return true;
  }
  bool parse_target(Target& t, bool with_namespace, const char* end_rule);
  std::unique_ptr<Stmt> parse_if();
  std::unique_ptr<Stmt> parse_for();
  std::unique_ptr<Stmt> parse_set();
  std::unique_ptr<Stmt> parse_macro();
  std::unique_ptr<Stmt> parse_filter_block();
  std::unique_ptr<Stmt> parse_simple_block(StmtKind kind, const char* end_name);

  static constexpr int kMaxStatementDepth = 100;
  int loop_depth_ = 0;
  int stmt_depth_ = 0;
};

Body StatementParser::subparse(std::initializer_list<const char*> end_names) {
  Body body;
  while (!failed() && cur().type != TokenType::kEof) {
    const Token& t = cur();
    if (t.type == TokenType::kData) {
      auto s = make(StmtKind::kText);
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == TokenType::kVariableBegin) {
      auto s = make(StmtKind::kOutput);
      next();
      ExprPtr e = parse_tuple(true, false, nullptr);
      if (!e) return body;
      s->exprs.push_back(std::move(e));
      if (cur().type != TokenType::kVariableEnd) {
        fail("expected end of print statement, got " + describe(cur()));
        return body;
      }
      next();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      next();
      for (const char* end : end_names) {
        if (is_name(end)) return body;
      }
      if (++stmt_depth_ > kMaxStatementDepth) {
        fail("statements nested too deeply");
        return body;
      }
      auto s = parse_statement();
      --stmt_depth_;
      if (!s) return body;
      if (!expect_block_end()) return body;
      body.push_back(std::move(s));
    } else {
      fail("unexpected " + describe(t));
    }
  }
  if (!failed() && end_names.size() > 0) {
    fail(std::string("unexpected end of template, expected '") + *end_names.begin() + "'");
  }
  return body;
}

std::unique_ptr<Stmt> StatementParser::parse_statement() {
  if (cur().type != TokenType::kName) { fail("tag name expected"); return nullptr; }
  const std::string tag = cur().text;
  if (tag == "if") return parse_if();
  if (tag == "for") return parse_for();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "filter") return parse_filter_block();
  if (tag == "generation") return parse_simple_block(StmtKind::kGeneration, "endgeneration");
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) { fail("'" + tag + "' outside of a loop"); return nullptr; }
    auto s = make(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue);
    next();
    return s;
  }
  if (tag == "print") {
    auto s = make(StmtKind::kOutput);
    next();
    while (cur().type != TokenType::kBlockEnd && !failed()) {
      if (!s->exprs.empty() && !expect_op(",")) return nullptr;
      ExprPtr e = parse_expression(true);
      if (!e) return nullptr;
      s->exprs.push_back(std::move(e));
    }
    return s;
  }
  for (const char* u : kUnsupportedStatements) {
    if (tag == u) { fail("unsupported statement '" + tag + "'"); return nullptr; }
  }
  fail("unknown statement '" + tag + "'");
  return nullptr;
}

bool StatementParser::parse_target(Target& t, bool with_namespace, const char* end_rule) {
  const bool paren = is_op("(");
  if (paren) next();
  while (true) {
    if (cur().type != TokenType::kName) { fail("expected a name to assign to"); return false; }
    t.names.push_back(cur().text);
    next();
    if (with_namespace && is_op(".") && t.names.size() == 1) {
      next();
      if (cur().type != TokenType::kName) { fail("expected an attribute name"); return false; }
      t.attr = cur().text;
      next();
      return true;
    }
    if (!is_op(",")) break;
    t.is_tuple = true;
    next();
    if ((end_rule && is_name(end_rule)) || (paren && is_op(")")) || is_op("=") ||
        cur().type == TokenType::kBlockEnd) {
      break;
    }
  }
  if (paren && !expect_op(")")) return false;
  return true;
}

std::unique_ptr<Stmt> StatementParser::parse_if() {
  auto s = make(StmtKind::kIf);
  next();
  while (true) {
    IfBranch br;
    br.cond = parse_tuple(false, false, nullptr);
    if (!br.cond || !body_until(br.body, {"elif", "else", "endif"})) return nullptr;
    s->branches.push_back(std::move(br));
    if (is_name("elif")) { next(); continue; }
    if (is_name("else")) {
      next();
      if (!body_until(s->else_body, {"endif"})) return nullptr;
    }
    break;
  }
  return finish("endif") ? std::move(s) : nullptr;
}

std::unique_ptr<Stmt> StatementParser::parse_for() {
  auto s = make(StmtKind::kFor);
  next();
  if (!parse_target(s->target, false, "in")) return nullptr;
  if (!is_name("in")) { fail("expected 'in' in for loop"); return nullptr; }
  next();
  s->expr = parse_tuple(false, false, "recursive");
  if (!s->expr) return nullptr;
  if (is_name("if")) {
    next();
    s->cond = parse_expression(true);
    if (!s->cond) return nullptr;
  }
  if (is_name("recursive")) { fail("unsupported: recursive for loops"); return nullptr; }
  ++loop_depth_;
  const bool ok = body_until(s->body, {"endfor", "else"});
  --loop_depth_;
  if (!ok) return nullptr;
  if (is_name("else")) {
    next();
    if (!body_until(s->else_body, {"endfor"})) return nullptr;
  }
  return finish("endfor") ? std::move(s) : nullptr;
}

std::unique_ptr<Stmt> StatementParser::parse_set() {
  auto s = make(StmtKind::kSet);
  next();
  if (!parse_target(s->target, true, nullptr)) return nullptr;
  if (is_op("=")) {
    next();
    s->expr = parse_tuple(true, false, nullptr);
    return s->expr ? std::move(s) : nullptr;
  }
  s->kind = StmtKind::kSetBlock;
  if (s->target.is_tuple || !s->target.attr.empty()) { fail("block set needs a plain name"); return nullptr; }
  if (is_op("|")) {
    s->expr = parse_filter_chain();
    if (!s->expr) return nullptr;
  }
  if (!body_until(s->body, {"endset"})) return nullptr;
  return finish("endset") ? std::move(s) : nullptr;
}

std::unique_ptr<Stmt> StatementParser::parse_macro() {
  auto s = make(StmtKind::kMacro);
  next();
  if (cur().type != TokenType::kName) { fail("expected macro name"); return nullptr; }
  s->name = cur().text;
  next();
  if (!expect_op("(")) return nullptr;
  while (!is_op(")") && !failed()) {
    if (!s->params.empty() && !expect_op(",")) return nullptr;
    if (cur().type != TokenType::kName) { fail("expected parameter name"); return nullptr; }
    s->params.push_back(cur().text);
    next();
    if (is_op("=")) {
      next();
      ExprPtr d = parse_expression(true);
      if (!d) return nullptr;
      s->defaults.push_back(std::move(d));
    } else if (!s->defaults.empty()) {
      fail("non-default argument follows default argument");
      return nullptr;
    }
  }
  if (!expect_op(")")) return nullptr;
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  ++macro_depth_;
  const bool ok = body_until(s->body, {"endmacro"});
  --macro_depth_;
  loop_depth_ = saved_loops;
  if (!ok) return nullptr;
  return finish("endmacro") ? std::move(s) : nullptr;
}

std::unique_ptr<Stmt> StatementParser::parse_filter_block() {
  auto s = make(StmtKind::kFilterBlock);
  next();
  s->expr = parse_filter_chain();
  if (!s->expr || !body_until(s->body, {"endfilter"})) return nullptr;
  return finish("endfilter") ? std::move(s) : nullptr;
}

std::unique_ptr<Stmt> StatementParser::parse_simple_block(StmtKind kind, const char* end_name) {
  auto s = make(kind);
  next();
  if (!body_until(s->body, {end_name})) return nullptr;
  return finish(end_name) ? std::move(s) : nullptr;
}

}  // namespace

Result<Template> parse_template(std::string_view source) {
  auto tokens = tokenize(source);
  if (!tokens) return tokens.error();
  StatementParser p(std::move(*tokens));
  Template t;
  t.body = p.subparse({});
  if (p.failed()) return p.error();
  analyze_scopes(t);
  return t;
}

}  // namespace pagoda::model::jinja
