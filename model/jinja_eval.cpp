// Jinja interpreter: expression evaluation (see jinja_interp_state.hpp).
#include "model/jinja_filters.hpp"
#include "model/jinja_interp_state.hpp"
#include "model/jinja_methods.hpp"
#include "model/jinja_operators.hpp"

namespace pagoda::model::jinja {

Result<std::string> Interpreter::printable(const Value& v) {
  if (v.is_callable() || v.is_iterator()) {
    return make_error("cannot output a " + type_name(v) + " (jinja2 prints its memory address); use |list");
  }
  return to_str(v);
}

Result<CallArgs> Interpreter::eval_args(const Expr& e, size_t first) {
  CallArgs a;
  for (size_t i = first; i < e.args.size(); ++i) {
    auto v = eval(*e.args[i]);
    if (!v) return v.error();
    a.args.push_back(std::move(*v));
  }
  for (const auto& [k, x] : e.kwargs) {
    auto v = eval(*x);
    if (!v) return v.error();
    a.kwargs.emplace_back(k, std::move(*v));
  }
  return a;
}

Result<Value> Interpreter::eval_filter_chain(const Expr& f, const Value& hole) {
  Value subject = hole;
  if (f.args[0]) {
    auto inner = eval_filter_chain(*f.args[0], hole);
    if (!inner) return inner;
    subject = *inner;
  }
  auto a = eval_args(f, 1);
  if (!a) return a.error();
  return apply_filter(f.name, subject, *a);
}

Result<Value> Interpreter::eval_getitem(const Expr& e) {
  auto obj = eval(*e.args[0]);
  if (!obj) return obj;
  const Expr& idx = *e.args[1];
  if (idx.kind != ExprKind::kSlice) {
    auto key = eval(idx);
    if (!key) return key;
    return get_item(*obj, *key);
  }
  Value bounds[3] = {Value::none(), Value::none(), Value::none()};
  for (size_t i = 0; i < 3; ++i) {
    if (!idx.args[i]) continue;
    auto b = eval(*idx.args[i]);
    if (!b) return b;
    bounds[i] = *b;
  }
  return get_slice(*obj, bounds[0], bounds[1], bounds[2]);
}

Result<Value> Interpreter::eval_compare(const Expr& e) {
  auto left = eval(*e.args[0]);
  if (!left) return left;
  Value l = *left;
  for (size_t i = 0; i < e.cmp.size(); ++i) {
    auto right = eval(*e.args[i + 1]);
    if (!right) return right;
    auto r = compare_op(e.cmp[i], l, *right);
    if (!r) return r.error();
    if (!*r) return Value::boolean(false);
    l = *right;
  }
  return Value::boolean(true);
}

Result<Value> Interpreter::eval_call(const Expr& e) {
  auto callee = eval(*e.args[0]);
  if (!callee) return callee;
  auto a = eval_args(e, 1);
  if (!a) return a.error();
  if (callee->is_callable()) return callee->callable().fn(*a);
  if (callee->is_undefined()) return undefined_error(*callee);
  return make_error("'" + type_name(*callee) + "' object is not callable");
}

Result<Value> Interpreter::eval_collection(const Expr& e) {
  if (e.kind == ExprKind::kDict) {
    Dict d;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      auto k = eval(*e.args[i]);
      if (!k) return k;
      if (!is_hashable(*k)) return make_error("unhashable type: '" + type_name(*k) + "'");
      auto v = eval(*e.args[i + 1]);
      if (!v) return v;
      d.set(std::move(*k), std::move(*v));
    }
    return Value::dict(std::move(d));
  }
  std::vector<Value> items;
  for (const auto& x : e.args) {
    auto v = eval(*x);
    if (!v) return v;
    items.push_back(std::move(*v));
  }
  return Value::list(std::move(items), e.kind == ExprKind::kTuple ? ListKind::kTuple : ListKind::kList);
}

Result<Value> Interpreter::eval_operator(const Expr& e) {
  auto l = eval(*e.args[0]);
  if (!l) return l;
  switch (e.kind) {
    case ExprKind::kNeg: return negate(*l);
    case ExprKind::kPos: return unary_plus(*l);
    case ExprKind::kNot: return Value::boolean(!truthy(*l));
    case ExprKind::kAnd:
    case ExprKind::kOr:  // Python semantics: the deciding operand is the value
      if (truthy(*l) == (e.kind == ExprKind::kOr)) return l;
      return eval(*e.args[1]);
    default: {
      auto r = eval(*e.args[1]);
      if (!r) return r;
      return binary_op(e.op, *l, *r);
    }
  }
}

Result<Value> Interpreter::eval_concat(const Expr& e) {
  std::string out;
  for (const auto& x : e.args) {
    auto v = eval(*x);
    if (!v) return v;
    auto text = printable(*v);
    if (!text) return text.error();
    out += *text;
  }
  return Value::string(std::move(out));
}

Result<Value> Interpreter::eval_filter_or_test(const Expr& e) {
  if (!e.args[0]) return make_error("filter without a subject");
  auto subject = eval(*e.args[0]);
  if (!subject) return subject;
  auto a = eval_args(e, 1);
  if (!a) return a.error();
  if (e.kind == ExprKind::kFilter) return apply_filter(e.name, *subject, *a);
  auto r = apply_test(e.name, *subject, *a);
  if (!r) return r.error();
  return Value::boolean(*r);
}

Result<Value> Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConst: return e.value;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kGetattr: {
      auto obj = eval(*e.args[0]);
      if (!obj) return obj;
      return get_attr(*obj, e.name);
    }
    case ExprKind::kGetitem: return eval_getitem(e);
    case ExprKind::kSlice: return Value::undefined("slice used outside a subscript");
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict: return eval_collection(e);
    case ExprKind::kNeg:
    case ExprKind::kPos:
    case ExprKind::kNot:
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kBinary: return eval_operator(e);
    case ExprKind::kCompare: return eval_compare(e);
    case ExprKind::kConcat: return eval_concat(e);
    case ExprKind::kCondExpr: {
      auto c = eval(*e.args[0]);
      if (!c) return c;
      if (truthy(*c)) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::kFilter:
    case ExprKind::kTest: return eval_filter_or_test(e);
    case ExprKind::kCall: return eval_call(e);
  }
  return make_error("unknown expression");
}

}  // namespace pagoda::model::jinja
