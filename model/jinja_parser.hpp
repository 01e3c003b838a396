// Jinja parser: tokens -> AST, with jinja2's grammar and operator precedence
// (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary <
// postfix/filters/tests), restricted to the subset this interpreter runs.
//
// Contract: parse_template() accepts the whole template or returns an Error
// naming the line and the construct. Besides syntax errors it rejects, at
// compile time, everything the interpreter would not render exactly as
// jinja2: unsupported statements (extends, include, import, from, block,
// with, call, autoescape, do, recursive loops), unknown or unsupported filter,
// test and method names (also string-named tests/filters given to select,
// reject, selectattr, rejectattr and map), *args/**kwargs, the globals
// cycler/joiner/lipsum, varargs/kwargs/caller inside macros, \N{...} string
// escapes, integer literals beyond int64, and nesting deeper than 200
// expression or 100 statement levels (bounded recursion).
// The AST is immutable after parsing and may be shared between threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/result.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model::jinja {

enum class ExprKind : uint8_t {
  kConst, kName, kGetattr, kGetitem, kSlice, kList, kTuple, kDict,
  kNeg, kPos, kNot, kAnd, kOr, kBinary, kCompare, kConcat, kCondExpr,
  kFilter, kTest, kCall
};
enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Children layout in `args` by kind:
//  kGetattr: {object}            (attribute in `name`)
//  kGetitem: {object, index}     (index may be a kSlice)
//  kSlice:   {start, stop, step} (each may be null)
//  kList/kTuple/kConcat: items;  kDict: {k0, v0, k1, v1, ...}
//  kNeg/kPos/kNot: {operand};    kAnd/kOr/kBinary: {left, right}
//  kCompare: {first, operand for cmp[0], operand for cmp[1], ...}
//  kCondExpr: {test, value_if_true, value_if_false (may be null)}
//  kFilter/kTest: {subject (null inside filter blocks), call args...}
//  kCall: {callee, call args...}
struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  Value value;        // kConst
  std::string name;   // kName, kGetattr, kFilter, kTest
  BinOp op = BinOp::kAdd;
  std::vector<CmpOp> cmp;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

enum class StmtKind : uint8_t {
  kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue,
  kFilterBlock, kGeneration
};

// Assignment target: one name, a tuple of names, or a namespace attribute
// (`ns.attr`: names = {"ns"}, attr = "attr").
struct Target {
  std::vector<std::string> names;
  bool is_tuple = false;
  std::string attr;
};

// jinja2's static scoping (idtracking.py): every frame (the template, a loop
// body, a loop's else and `if` test, a macro, a filter block, a block set, a
// generation block) declares the names it loads or stores, each initialized
// on frame entry as: kParam (bound by the construct), kResolve (looked up in
// the render context), kAlias (the enclosing frame's current value) or
// kUndefined. Names a frame neither loads first nor stores resolve to the
// nearest enclosing frame that declares them.
enum class LoadKind : uint8_t { kParam, kResolve, kAlias, kUndefined };
struct FrameSymbols {
  std::vector<std::pair<std::string, LoadKind>> slots;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct IfBranch {
  ExprPtr cond;
  Body body;
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;            // kText
  std::vector<ExprPtr> exprs;  // kOutput
  ExprPtr expr;    // kFor: iterable; kSet: value; kSetBlock/kFilterBlock: filter chain or null
  ExprPtr cond;    // kFor: the `if` filter, may be null
  Target target;   // kFor, kSet, kSetBlock
  std::vector<IfBranch> branches;  // kIf: if + elifs
  Body body;       // kFor/kMacro/kSetBlock/kFilterBlock/kGeneration body
  Body else_body;  // kIf, kFor
  std::string name;                 // kMacro
  std::vector<std::string> params;  // kMacro
  std::vector<ExprPtr> defaults;    // kMacro: defaults of the last params
  // Scopes (filled by analyze_scopes): the body's frame (kFor, kMacro,
  // kSetBlock, kFilterBlock, kGeneration), a for loop's else and test frames.
  FrameSymbols frame, else_frame, test_frame;
};

struct Template {
  Body body;
  FrameSymbols frame;
};

// Computes every frame's symbols as jinja2 does (jinja_scopes.cpp); called by
// parse_template.
void analyze_scopes(Template& t);

Result<Template> parse_template(std::string_view source);

}  // namespace pagoda::model::jinja
