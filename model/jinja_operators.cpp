// Python operator semantics (see jinja_operators.hpp).
#include "model/jinja_operators.hpp"

#include <cmath>

#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

Error type_error(const char* op, const Value& a, const Value& b) {
  return make_error(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) +
                    "' and '" + type_name(b) + "'");
}

Error overflow() { return make_error("integer overflow (values beyond int64 are not supported)"); }

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd: return "+";
    case BinOp::kSub: return "-";
    case BinOp::kMul: return "*";
    case BinOp::kDiv: return "/";
    case BinOp::kFloorDiv: return "//";
    case BinOp::kMod: return "%";
    case BinOp::kPow: return "** or pow()";
  }
  return "?";
}

bool is_int_like(const Value& v) { return v.is_int() || v.is_bool(); }

// Python's float divmod.
void float_divmod(double x, double y, double& div, double& mod) {
  mod = std::fmod(x, y);
  div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (div != 0.0) {
    const double floordiv = std::floor(div);
    div = (div - floordiv > 0.5) ? floordiv + 1.0 : floordiv;
  } else {
    div = std::copysign(0.0, x / y);
  }
}

Result<Value> int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) return make_error("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
  }
  return Value::integer(result);
}

Result<Value> repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.list().kind);
}

bool is_plain_sequence(const Value& v) {
  return v.is_list() && (v.list().kind == ListKind::kList || v.list().kind == ListKind::kTuple);
}

Result<Value> add(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    if (a.is_markup() || b.is_markup()) {  // markupsafe escapes the plain operand
      const std::string l = a.is_markup() ? a.str() : pystr::html_escape(a.str());
      const std::string r = b.is_markup() ? b.str() : pystr::html_escape(b.str());
      return Value::markup(l + r);
    }
    return Value::string(a.str() + b.str());
  }
  if (is_plain_sequence(a) && is_plain_sequence(b) && a.list().kind == b.list().kind) {
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.list().kind);
  }
  if (a.is_string() && !b.is_string()) {
    return make_error("can only concatenate str (not \"" + type_name(b) + "\") to str");
  }
  return type_error("+", a, b);
}

Result<Value> numeric(BinOp op, const Value& a, const Value& b) {
  if (is_int_like(a) && is_int_like(b)) {
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case BinOp::kAdd: if (__builtin_add_overflow(x, y, &r)) return overflow(); return Value::integer(r);
      case BinOp::kSub: if (__builtin_sub_overflow(x, y, &r)) return overflow(); return Value::integer(r);
      case BinOp::kMul: if (__builtin_mul_overflow(x, y, &r)) return overflow(); return Value::integer(r);
      case BinOp::kDiv:
        if (y == 0) return make_error("division by zero");
        return Value::number(static_cast<double>(x) / static_cast<double>(y));
      case BinOp::kFloorDiv: case BinOp::kMod: {
        if (y == 0) return make_error("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) { m += y; q -= 1; }
        return Value::integer(op == BinOp::kMod ? m : q);
      }
      case BinOp::kPow: return int_pow(x, y);
    }
  }
  const double x = a.as_float(), y = b.as_float();
  switch (op) {
    case BinOp::kAdd: return Value::number(x + y);
    case BinOp::kSub: return Value::number(x - y);
    case BinOp::kMul: return Value::number(x * y);
    case BinOp::kDiv:
      if (y == 0.0) return make_error("float division by zero");
      return Value::number(x / y);
    case BinOp::kFloorDiv: case BinOp::kMod: {
      if (y == 0.0) return make_error(op == BinOp::kMod ? "float modulo" : "float floor division by zero");
      double div = 0, mod = 0;
      float_divmod(x, y, div, mod);
      return Value::number(op == BinOp::kMod ? mod : div);
    }
    case BinOp::kPow:
      if (x == 0.0 && y < 0) return make_error("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::trunc(y)) return make_error("complex results are not supported");
      if (std::isinf(std::pow(x, y)) && std::isfinite(x) && std::isfinite(y)) {
        return make_error("(34, 'Numerical result out of range')");
      }
      return Value::number(std::pow(x, y));
  }
  return type_error(op_symbol(op), a, b);
}

}  // namespace

Result<Value> binary_op(BinOp op, const Value& a, const Value& b) {
  if (op == BinOp::kMod && a.is_string()) return printf_format(a, b);
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) return numeric(op, a, b);
  if (op == BinOp::kAdd) return add(a, b);
  if (op == BinOp::kMul) {
    if ((a.is_string() || is_plain_sequence(a)) && is_int_like(b)) return repeat(a, b.as_int());
    if ((b.is_string() || is_plain_sequence(b)) && is_int_like(a)) return repeat(b, a.as_int());
  }
  return type_error(op_symbol(op), a, b);
}

Result<Value> negate(const Value& a) {
  if (a.is_undefined()) return undefined_error(a);
  if (a.is_float()) return Value::number(-a.as_float());
  if (is_int_like(a)) {
    if (a.as_int() == INT64_MIN) return overflow();
    return Value::integer(-a.as_int());
  }
  return make_error("bad operand type for unary -: '" + type_name(a) + "'");
}

Result<Value> unary_plus(const Value& a) {
  if (a.is_undefined()) return undefined_error(a);
  if (a.is_float()) return a;
  if (is_int_like(a)) return Value::integer(a.as_int());
  return make_error("bad operand type for unary +: '" + type_name(a) + "'");
}

Result<bool> compare_op(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq: return equals(a, b);
    case CmpOp::kNe: return !equals(a, b);
    case CmpOp::kIn: return contains(b, a);
    case CmpOp::kNotIn: {
      auto r = contains(b, a);
      if (!r) return r.error();
      return !*r;
    }
    default: break;
  }
  auto c = compare(a, b);
  if (!c) {
    const char* sym = op == CmpOp::kLt ? "<" : op == CmpOp::kLe ? "<=" : op == CmpOp::kGt ? ">" : ">=";
    if (a.is_undefined() || b.is_undefined()) return c.error();
    return make_error(std::string("'") + sym + "' not supported between instances of '" +
                      type_name(a) + "' and '" + type_name(b) + "'");
  }
  switch (op) {
    case CmpOp::kLt: return *c < 0;
    case CmpOp::kLe: return *c <= 0;
    case CmpOp::kGt: return *c > 0;
    default: return *c >= 0;
  }
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kString:
      if (!item.is_string()) {
        return make_error("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::kDict:
      if (!is_hashable(item)) return make_error("unhashable type: '" + type_name(item) + "'");
      return container.dict().find(item) != nullptr;
    case Kind::kUndefined:
      return false;
    case Kind::kIterator: {
      IterState& it = container.iter();
      while (it.pos < it.items.size()) {
        if (equals(it.items[it.pos++], item)) return true;
      }
      if (it.error) {
        Error e = *it.error;
        it.error.reset();
        return e;
      }
      return false;
    }
    default:
      return make_error("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace pagoda::model::jinja
