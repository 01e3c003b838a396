// Jinja parser: filters, tests, calls and the compile-time checks of the
// names they use (see jinja_parse_state.hpp and jinja_parser.hpp).
#include <string>

#include "model/jinja_filters.hpp"
#include "model/jinja_methods.hpp"
#include "model/jinja_parse_state.hpp"

namespace pagoda::model::jinja {
namespace {

bool is_const_string(const ExprPtr& e) {
  return e && e->kind == ExprKind::kConst && e->value.is_string();
}

}  // namespace

ExprPtr ParserState::parse_filter(ExprPtr node) {
  while (is_op("|")) {
    next();
    if (cur().type != TokenType::kName) { fail("expected a filter name"); return nullptr; }
    ExprPtr f = make(ExprKind::kFilter, cur().line);
    f->name = cur().text;
    next();
    while (is_op(".") && !failed()) {
      next();
      f->name += "." + cur().text;
      next();
    }
    f->args.push_back(std::move(node));
    if (is_op("(") && !parse_call_args(*f)) return nullptr;
    if (!check_filter(*f)) return nullptr;
    node = std::move(f);
  }
  return node;
}

ExprPtr ParserState::parse_filter_chain() {
  if (is_op("|")) next();  // block set has a pipe; filter blocks name the filter directly
  if (cur().type != TokenType::kName) { fail("expected a filter name"); return nullptr; }
  ExprPtr f = make(ExprKind::kFilter, cur().line);
  f->name = cur().text;
  next();
  f->args.push_back(nullptr);  // the hole the body's output fills
  if (is_op("(") && !parse_call_args(*f)) return nullptr;
  if (!check_filter(*f)) return nullptr;
  return parse_filter(std::move(f));
}

ExprPtr ParserState::parse_test(ExprPtr node) {
  const int line = cur().line;
  next();  // 'is'
  bool negated = false;
  if (is_name("not")) { negated = true; next(); }
  if (cur().type != TokenType::kName) { fail("expected a test name"); return nullptr; }
  ExprPtr t = make(ExprKind::kTest, line);
  t->name = cur().text;
  next();
  while (is_op(".") && !failed()) {
    next();
    t->name += "." + cur().text;
    next();
  }
  t->args.push_back(std::move(node));
  const TokenType ty = cur().type;
  if (is_op("(")) {
    if (!parse_call_args(*t)) return nullptr;
  } else if ((ty == TokenType::kName || ty == TokenType::kString || ty == TokenType::kInteger ||
              ty == TokenType::kFloat || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) { fail("You cannot chain multiple tests with is"); return nullptr; }
    ExprPtr arg = parse_primary();
    if (arg) arg = parse_postfix(std::move(arg));
    if (!arg) return nullptr;
    t->args.push_back(std::move(arg));
  }
  if (!check_test_name(t->name, line)) return nullptr;
  if (!negated) return t;
  ExprPtr n = make(ExprKind::kNot, line);
  n->args.push_back(std::move(t));
  return n;
}

ExprPtr ParserState::parse_call(ExprPtr callee) {
  ExprPtr c = make(ExprKind::kCall, cur().line);
  c->args.push_back(std::move(callee));
  if (!parse_call_args(*c) || !check_call(*c)) return nullptr;
  return c;
}

bool ParserState::parse_call_args(Expr& into) {
  if (!expect_op("(")) return false;
  bool require_comma = false;
  while (!is_op(")")) {
    if (require_comma) {
      if (!expect_op(",")) return false;
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) { fail("unsupported: *args / **kwargs in calls"); return false; }
    if (cur().type == TokenType::kName && look().type == TokenType::kOperator && look().text == "=") {
      std::string key = cur().text;
      next();
      next();
      ExprPtr v = parse_expression(true);
      if (!v) return false;
      into.kwargs.emplace_back(std::move(key), std::move(v));
    } else {
      if (!into.kwargs.empty()) { fail("invalid syntax for function call expression"); return false; }
      ExprPtr v = parse_expression(true);
      if (!v) return false;
      into.args.push_back(std::move(v));
    }
    require_comma = true;
  }
  return expect_op(")");
}

bool ParserState::check_filter(const Expr& f) {
  if (!is_known_filter(f.name)) {
    fail_at(f.line, "unsupported filter '" + f.name + "'");
    return false;
  }
  // String-named tests and filters passed to select/map families.
  size_t test_arg = 0;
  if (f.name == "select" || f.name == "reject") test_arg = 1;
  if (f.name == "selectattr" || f.name == "rejectattr") test_arg = 2;
  if (test_arg && f.args.size() > test_arg && is_const_string(f.args[test_arg])) {
    return check_test_name(f.args[test_arg]->value.str(), f.line);
  }
  bool has_attribute = false;
  for (const auto& kw : f.kwargs) has_attribute = has_attribute || kw.first == "attribute";
  if (f.name == "map" && !has_attribute && f.args.size() > 1 && is_const_string(f.args[1]) &&
      !is_known_filter(f.args[1]->value.str())) {
    fail_at(f.line, "unsupported filter '" + f.args[1]->value.str() + "' (in map)");
    return false;
  }
  return true;
}

bool ParserState::check_test_name(const std::string& name, int line) {
  if (is_known_test(name)) return true;
  fail_at(line, "unsupported test '" + name + "'");
  return false;
}

bool ParserState::check_call(const Expr& call) {
  const Expr& callee = *call.args[0];
  if (callee.kind == ExprKind::kGetattr && !is_known_method(callee.name)) {
    fail_at(call.line, "unsupported method '" + callee.name + "'");
    return false;
  }
  if (callee.kind == ExprKind::kName && callee.name == "loop") {
    fail_at(call.line, "unsupported: recursive loop() calls");
    return false;
  }
  return true;
}

}  // namespace pagoda::model::jinja
