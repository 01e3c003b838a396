// Internal to the Jinja parser: the token cursor, the first error, and the
// expression grammar (jinja_parse_expr.cpp). Statements build on it in
// jinja_parser.cpp. Not for use outside those two files.
//
// Error handling: parse functions return null/false after the first error,
// which fail() records (with its line); failed()/error() expose it.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gpu/result.hpp"
#include "model/jinja_lexer.hpp"
#include "model/jinja_parser.hpp"

namespace pagoda::model::jinja {

class ParserState {
 public:
  explicit ParserState(std::vector<Token> tokens) : toks_(std::move(tokens)) {}
  bool failed() const { return failed_; }
  const Error& error() const { return error_; }

 protected:
  const Token& cur() const { return toks_[i_]; }
  const Token& look() const { return toks_[i_ + 1 < toks_.size() ? i_ + 1 : i_]; }
  void next() { if (i_ + 1 < toks_.size()) ++i_; }
  bool is_op(const char* op) const {
    return cur().type == TokenType::kOperator && cur().text == op;
  }
  bool is_name(const char* name) const {
    return cur().type == TokenType::kName && cur().text == name;
  }
  bool expect_op(const char* op);
  void fail(const std::string& message);
  void fail_at(int line, const std::string& message);
  static std::string describe(const Token& t);

  // Grammar (jinja2's parser.py structure).
  ExprPtr parse_expression(bool with_condexpr);
  // A comma-separated tuple or a single expression. `simplified` parses
  // only primaries; `extra_end` names a keyword that ends the tuple.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, const char* extra_end);
  // `|f1(args)|f2...` applied to a hole (filter blocks, block set).
  ExprPtr parse_filter_chain();

  int macro_depth_ = 0;

 private:
  ExprPtr make(ExprKind k, int line);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_unary_inner(bool with_filter);
  ExprPtr parse_unary_filtered() { return parse_unary(true); }
  ExprPtr binary_chain(ExprPtr left, ExprPtr (ParserState::*operand)(),
                       std::initializer_list<std::pair<const char*, BinOp>> ops);
  ExprPtr parse_primary();
  ExprPtr parse_list_or_dict(bool dict);
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_filter(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_call(ExprPtr callee);
  bool parse_call_args(Expr& into);
  bool is_tuple_end(const char* extra_end) const;
  // Compile-time checks of names against what the interpreter supports.
  bool check_filter(const Expr& f);
  bool check_test_name(const std::string& name, int line);
  bool check_call(const Expr& call);

  static constexpr int kMaxDepth = 200;
  int depth_ = 0;
  std::vector<Token> toks_;
  size_t i_ = 0;
  bool failed_ = false;
  Error error_;
};

}  // namespace pagoda::model::jinja
