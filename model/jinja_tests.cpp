// Jinja tests (`x is name`), as jinja2/tests.py defines them (see
// jinja_filters.hpp).
#include <algorithm>
#include <array>
#include <cctype>

#include "model/jinja_filters.hpp"
#include "model/jinja_operators.hpp"
#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

using TestFn = Result<bool> (*)(const Value& v, const std::vector<Value>& args);

Result<bool> need_args(const std::vector<Value>& args, size_t n, std::string_view name) {
  if (args.size() != n) {
    return make_error("test '" + std::string(name) + "' takes " + std::to_string(n) +
                      " argument(s), " + std::to_string(args.size()) + " given");
  }
  return true;
}

Result<bool> mod_equals(const Value& v, const Value& divisor, int64_t expected) {
  auto r = binary_op(BinOp::kMod, v, divisor);
  if (!r) return r.error();
  return equals(*r, Value::integer(expected));
}

Result<bool> cmp(CmpOp op, const Value& v, const std::vector<Value>& args) {
  if (args.size() != 1) return make_error("comparison test takes exactly one argument");
  return compare_op(op, v, args[0]);
}

bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined: return false;  // distinct Undefined objects
    case Kind::kNone: return true;
    case Kind::kBool: return a.as_bool() == b.as_bool();
    case Kind::kInt:  // CPython caches small ints
      return a.as_int() == b.as_int() && a.as_int() >= -5 && a.as_int() <= 256;
    case Kind::kFloat: return false;
    default: return a.identity() == b.identity();
  }
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"defined", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return !v.is_undefined(); }},
    {"undefined", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_undefined(); }},
    {"none", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_none(); }},
    {"boolean", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_bool(); }},
    {"false", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_bool() && !v.as_bool(); }},
    {"true", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_bool() && v.as_bool(); }},
    {"integer", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_int(); }},
    {"float", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_float(); }},
    {"number", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_number(); }},
    {"string", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_string(); }},
    {"mapping", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_dict(); }},
    {"escaped", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return v.is_markup(); }},
    {"iterable",
     [](const Value& v, const std::vector<Value>&) -> Result<bool> {
       return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() || v.is_iterator() ||
              (v.is_object() && v.object().type_name == "LoopContext");
     }},
    {"sequence",
     [](const Value& v, const std::vector<Value>&) -> Result<bool> {
       if (v.is_list()) {
         const ListKind k = v.list().kind;
         return k == ListKind::kList || k == ListKind::kTuple || k == ListKind::kRange;
       }
       return v.is_undefined() || v.is_string() || v.is_dict();
     }},
    {"callable",
     [](const Value& v, const std::vector<Value>&) -> Result<bool> {
       return v.is_callable() || v.is_undefined() ||
              (v.is_object() && v.object().type_name == "LoopContext");
     }},
    {"sameas",
     [](const Value& v, const std::vector<Value>& a) -> Result<bool> {
       if (auto r = need_args(a, 1, "sameas"); !r) return r;
       return same_as(v, a[0]);
     }},
    {"odd", [](const Value& v, const std::vector<Value>&) { return mod_equals(v, Value::integer(2), 1); }},
    {"even", [](const Value& v, const std::vector<Value>&) { return mod_equals(v, Value::integer(2), 0); }},
    {"divisibleby",
     [](const Value& v, const std::vector<Value>& a) -> Result<bool> {
       if (auto r = need_args(a, 1, "divisibleby"); !r) return r;
       return mod_equals(v, a[0], 0);
     }},
    {"lower", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return pystr::islower(to_str(v)); }},
    {"upper", [](const Value& v, const std::vector<Value>&) -> Result<bool> { return pystr::isupper(to_str(v)); }},
    {"in",
     [](const Value& v, const std::vector<Value>& a) -> Result<bool> {
       if (auto r = need_args(a, 1, "in"); !r) return r;
       return contains(a[0], v);
     }},
    {"filter",
     [](const Value& v, const std::vector<Value>&) -> Result<bool> {
       return v.is_string() && is_known_filter(v.str());
     }},
    {"test",
     [](const Value& v, const std::vector<Value>&) -> Result<bool> {
       return v.is_string() && is_known_test(v.str());
     }},
    {"==", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kEq, v, a); }},
    {"eq", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kEq, v, a); }},
    {"equalto", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kEq, v, a); }},
    {"!=", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kNe, v, a); }},
    {"ne", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kNe, v, a); }},
    {">", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kGt, v, a); }},
    {"gt", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kGt, v, a); }},
    {"greaterthan", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kGt, v, a); }},
    {">=", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kGe, v, a); }},
    {"ge", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kGe, v, a); }},
    {"<", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kLt, v, a); }},
    {"lt", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kLt, v, a); }},
    {"lessthan", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kLt, v, a); }},
    {"<=", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kLe, v, a); }},
    {"le", [](const Value& v, const std::vector<Value>& a) { return cmp(CmpOp::kLe, v, a); }},
};

const TestEntry* find_test(std::string_view name) {
  for (const TestEntry& t : kTests) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

bool is_known_test(std::string_view name) { return find_test(name) != nullptr; }

Result<bool> apply_test(std::string_view name, const Value& subject, const CallArgs& args) {
  const TestEntry* t = find_test(name);
  if (!t) return make_error("No test named '" + std::string(name) + "'.");
  if (!args.kwargs.empty()) return make_error("test '" + std::string(name) + "' takes no keyword arguments");
  const bool takes_args = name == "sameas" || name == "divisibleby" || name == "in" ||
                          (!name.empty() && !std::isalpha(static_cast<unsigned char>(name[0]))) ||
                          name == "eq" || name == "equalto" || name == "ne" || name == "gt" ||
                          name == "greaterthan" || name == "ge" || name == "lt" ||
                          name == "lessthan" || name == "le";
  if (!takes_args && !args.args.empty()) {
    return make_error("test '" + std::string(name) + "' takes no arguments");
  }
  return t->fn(subject, args.args);
}

}  // namespace pagoda::model::jinja
