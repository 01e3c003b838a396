// Jinja parser: expressions (see jinja_parse_state.hpp). The functions follow
// jinja2's parser.py one to one so precedence and associativity match;
// filters, tests and calls are in jinja_parse_call.cpp.
#include <string>

#include "model/jinja_parse_state.hpp"

namespace pagoda::model::jinja {

void ParserState::fail(const std::string& message) { fail_at(cur().line, message); }

void ParserState::fail_at(int line, const std::string& message) {
  if (failed_) return;
  failed_ = true;
  error_ = make_error("template error at line " + std::to_string(line) + ": " + message);
}

std::string ParserState::describe(const Token& t) {
  switch (t.type) {
    case TokenType::kEof: return "end of template";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kData: return "template data";
    case TokenType::kString: return "string literal";
    default: return "'" + t.text + "'";
  }
}

bool ParserState::expect_op(const char* op) {
  if (is_op(op)) { next(); return true; }
  fail(std::string("expected '") + op + "', got " + describe(cur()));
  return false;
}

ExprPtr ParserState::make(ExprKind k, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->line = line;
  return e;
}

ExprPtr ParserState::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

bool ParserState::is_tuple_end(const char* extra_end) const {
  if (cur().type == TokenType::kVariableEnd || cur().type == TokenType::kBlockEnd) return true;
  if (is_op(")")) return true;
  return extra_end && is_name(extra_end);
}

ExprPtr ParserState::parse_tuple(bool with_condexpr, bool explicit_parens, const char* extra_end) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty() && !expect_op(",")) return nullptr;
    if (is_tuple_end(extra_end)) break;
    ExprPtr e = parse_expression(with_condexpr);
    if (!e) return nullptr;
    items.push_back(std::move(e));
    if (!is_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) {
      fail("expected an expression, got " + describe(cur()));
      return nullptr;
    }
  }
  ExprPtr t = make(ExprKind::kTuple, line);
  t->args = std::move(items);
  return t;
}

ExprPtr ParserState::parse_condexpr() {
  const int line = cur().line;
  ExprPtr expr1 = parse_or();
  while (expr1 && is_name("if")) {
    next();
    ExprPtr expr2 = parse_or();
    if (!expr2) return nullptr;
    ExprPtr expr3;
    if (is_name("else")) {
      next();
      expr3 = parse_condexpr();
      if (!expr3) return nullptr;
    }
    ExprPtr c = make(ExprKind::kCondExpr, line);
    c->args.push_back(std::move(expr2));
    c->args.push_back(std::move(expr1));
    c->args.push_back(std::move(expr3));
    expr1 = std::move(c);
  }
  return expr1;
}

ExprPtr ParserState::parse_or() {
  ExprPtr left = parse_and();
  while (left && is_name("or")) {
    const int line = cur().line;
    next();
    ExprPtr right = parse_and();
    if (!right) return nullptr;
    ExprPtr n = make(ExprKind::kOr, line);
    n->args.push_back(std::move(left));
    n->args.push_back(std::move(right));
    left = std::move(n);
  }
  return left;
}

ExprPtr ParserState::parse_and() {
  ExprPtr left = parse_not();
  while (left && is_name("and")) {
    const int line = cur().line;
    next();
    ExprPtr right = parse_not();
    if (!right) return nullptr;
    ExprPtr n = make(ExprKind::kAnd, line);
    n->args.push_back(std::move(left));
    n->args.push_back(std::move(right));
    left = std::move(n);
  }
  return left;
}

ExprPtr ParserState::parse_not() {
  if (!is_name("not")) return parse_compare();
  const int line = cur().line;
  next();
  ExprPtr operand = parse_not();
  if (!operand) return nullptr;
  ExprPtr n = make(ExprKind::kNot, line);
  n->args.push_back(std::move(operand));
  return n;
}

ExprPtr ParserState::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  if (!first) return nullptr;
  ExprPtr cmp = make(ExprKind::kCompare, line);
  cmp->args.push_back(std::move(first));
  static const std::pair<const char*, CmpOp> kOps[] = {
      {"==", CmpOp::kEq}, {"!=", CmpOp::kNe}, {"<", CmpOp::kLt},
      {"<=", CmpOp::kLe}, {">", CmpOp::kGt}, {">=", CmpOp::kGe}};
  while (true) {
    bool matched = false;
    for (const auto& [text, op] : kOps) {
      if (is_op(text)) { next(); cmp->cmp.push_back(op); matched = true; break; }
    }
    if (!matched && is_name("in")) {
      next();
      cmp->cmp.push_back(CmpOp::kIn);
      matched = true;
    } else if (!matched && is_name("not") && look().type == TokenType::kName && look().text == "in") {
      next();
      next();
      cmp->cmp.push_back(CmpOp::kNotIn);
      matched = true;
    }
    if (!matched) break;
    ExprPtr operand = parse_math1();
    if (!operand) return nullptr;
    cmp->args.push_back(std::move(operand));
  }
  if (cmp->cmp.empty()) return std::move(cmp->args[0]);
  return cmp;
}

ExprPtr ParserState::binary_chain(ExprPtr left, ExprPtr (ParserState::*operand)(),
                                  std::initializer_list<std::pair<const char*, BinOp>> ops) {
  while (left) {
    const std::pair<const char*, BinOp>* hit = nullptr;
    for (const auto& o : ops) {
      if (is_op(o.first)) { hit = &o; break; }
    }
    if (!hit) break;
    const int line = cur().line;
    next();
    ExprPtr right = (this->*operand)();
    if (!right) return nullptr;
    ExprPtr n = make(ExprKind::kBinary, line);
    n->op = hit->second;
    n->args.push_back(std::move(left));
    n->args.push_back(std::move(right));
    left = std::move(n);
  }
  return left;
}

ExprPtr ParserState::parse_math1() {
  return binary_chain(parse_concat(), &ParserState::parse_concat,
                      {{"+", BinOp::kAdd}, {"-", BinOp::kSub}});
}

ExprPtr ParserState::parse_concat() {
  const int line = cur().line;
  ExprPtr first = parse_math2();
  if (!first || !is_op("~")) return first;
  ExprPtr c = make(ExprKind::kConcat, line);
  c->args.push_back(std::move(first));
  while (is_op("~")) {
    next();
    ExprPtr e = parse_math2();
    if (!e) return nullptr;
    c->args.push_back(std::move(e));
  }
  return c;
}

ExprPtr ParserState::parse_math2() {
  return binary_chain(parse_pow(), &ParserState::parse_pow,
                      {{"*", BinOp::kMul}, {"/", BinOp::kDiv}, {"//", BinOp::kFloorDiv},
                       {"%", BinOp::kMod}});
}

ExprPtr ParserState::parse_pow() {
  return binary_chain(parse_unary_filtered(), &ParserState::parse_unary_filtered,
                      {{"**", BinOp::kPow}});
}

ExprPtr ParserState::parse_unary(bool with_filter) {
  // Bounded recursion: hostile nesting fails instead of exhausting the stack.
  if (++depth_ > kMaxDepth) {
    fail("expression nested too deeply");
    --depth_;
    return nullptr;
  }
  ExprPtr node = parse_unary_inner(with_filter);
  --depth_;
  return node;
}

ExprPtr ParserState::parse_unary_inner(bool with_filter) {
  const int line = cur().line;
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const bool neg = is_op("-");
    next();
    ExprPtr operand = parse_unary(false);
    if (!operand) return nullptr;
    node = make(neg ? ExprKind::kNeg : ExprKind::kPos, line);
    node->args.push_back(std::move(operand));
  } else {
    node = parse_primary();
  }
  if (node) node = parse_postfix(std::move(node));
  if (node && with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ParserState::parse_primary() {
  const Token& t = cur();
  const int line = t.line;
  if (t.type == TokenType::kName) {
    ExprPtr c = make(ExprKind::kConst, line);
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
      c->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
    } else if (t.text == "none" || t.text == "None") {
      c->value = Value::none();
    } else {
      if (t.text == "cycler" || t.text == "joiner" || t.text == "lipsum") {
        fail("unsupported global '" + t.text + "'");
        return nullptr;
      }
      if (macro_depth_ > 0 && (t.text == "varargs" || t.text == "kwargs" || t.text == "caller")) {
        fail("unsupported in macros: '" + t.text + "'");
        return nullptr;
      }
      c->kind = ExprKind::kName;
      c->name = t.text;
    }
    next();
    return c;
  }
  if (t.type == TokenType::kString) {
    std::string s;
    while (cur().type == TokenType::kString) { s += cur().text; next(); }
    ExprPtr c = make(ExprKind::kConst, line);
    c->value = Value::string(std::move(s));
    return c;
  }
  if (t.type == TokenType::kInteger || t.type == TokenType::kFloat) {
    ExprPtr c = make(ExprKind::kConst, line);
    c->value = t.type == TokenType::kInteger ? Value::integer(t.int_value) : Value::number(t.float_value);
    next();
    return c;
  }
  if (is_op("(")) {
    next();
    ExprPtr e = parse_tuple(true, true, nullptr);
    if (!e || !expect_op(")")) return nullptr;
    return e;
  }
  if (is_op("[") || is_op("{")) return parse_list_or_dict(is_op("{"));
  fail("unexpected " + describe(t));
  return nullptr;
}

ExprPtr ParserState::parse_list_or_dict(bool dict) {
  ExprPtr n = make(dict ? ExprKind::kDict : ExprKind::kList, cur().line);
  const char* close = dict ? "}" : "]";
  next();
  while (!is_op(close)) {
    if (!n->args.empty() && !expect_op(",")) return nullptr;
    if (is_op(close)) break;
    ExprPtr e = parse_expression(true);
    if (!e) return nullptr;
    n->args.push_back(std::move(e));
    if (dict) {
      if (!expect_op(":")) return nullptr;
      ExprPtr v = parse_expression(true);
      if (!v) return nullptr;
      n->args.push_back(std::move(v));
    }
  }
  if (!expect_op(close)) return nullptr;
  return n;
}

ExprPtr ParserState::parse_postfix(ExprPtr node) {
  while (node) {
    if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else break;
  }
  return node;
}

ExprPtr ParserState::parse_filter_expr(ExprPtr node) {
  while (node) {
    if (is_op("|")) node = parse_filter(std::move(node));
    else if (is_name("is")) node = parse_test(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else break;
  }
  return node;
}

ExprPtr ParserState::parse_subscript(ExprPtr node) {
  const int line = cur().line;
  if (is_op(".")) {
    next();
    if (cur().type == TokenType::kName) {
      ExprPtr g = make(ExprKind::kGetattr, line);
      g->name = cur().text;
      g->args.push_back(std::move(node));
      next();
      return g;
    }
    if (cur().type != TokenType::kInteger) { fail("expected name or number"); return nullptr; }
    ExprPtr g = make(ExprKind::kGetitem, line);
    g->args.push_back(std::move(node));
    ExprPtr c = make(ExprKind::kConst, line);
    c->value = Value::integer(cur().int_value);
    g->args.push_back(std::move(c));
    next();
    return g;
  }
  next();  // '['
  std::vector<ExprPtr> idx;
  while (!is_op("]")) {
    if (!idx.empty() && !expect_op(",")) return nullptr;
    ExprPtr e = parse_subscribed();
    if (!e) return nullptr;
    idx.push_back(std::move(e));
  }
  if (!expect_op("]")) return nullptr;
  ExprPtr g = make(ExprKind::kGetitem, line);
  g->args.push_back(std::move(node));
  if (idx.size() == 1) {
    g->args.push_back(std::move(idx[0]));
  } else {
    ExprPtr t = make(ExprKind::kTuple, line);
    t->args = std::move(idx);
    g->args.push_back(std::move(t));
  }
  return g;
}

ExprPtr ParserState::parse_subscribed() {
  ExprPtr s = make(ExprKind::kSlice, cur().line);
  auto bound_end = [&] { return is_op("]") || is_op(","); };
  if (is_op(":")) {
    next();
    s->args.push_back(nullptr);
  } else {
    ExprPtr e = parse_expression(true);
    if (!e || !is_op(":")) return e;
    next();
    s->args.push_back(std::move(e));
  }
  if (is_op(":") || bound_end()) {
    s->args.push_back(nullptr);
  } else {
    ExprPtr e = parse_expression(true);
    if (!e) return nullptr;
    s->args.push_back(std::move(e));
  }
  if (is_op(":")) {
    next();
    if (bound_end()) {
      s->args.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!e) return nullptr;
      s->args.push_back(std::move(e));
    }
  } else {
    s->args.push_back(nullptr);
  }
  return s;
}

}  // namespace pagoda::model::jinja
