// jinja::Value and its Python semantics (see jinja_value.hpp).
#include "model/jinja_value.hpp"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

const std::string& default_undefined_message() {
  static const std::string m = "value is undefined";
  return m;
}

std::string join_repr(const std::vector<Value>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr(items[i]);
  }
  return out;
}

std::string dict_repr(const Dict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += repr(k) + ": " + repr(v);
  }
  return out + "}";
}

std::string list_repr(const ListData& l) {
  switch (l.kind) {
    case ListKind::kList: return "[" + join_repr(l.items) + "]";
    case ListKind::kTuple:
      return "(" + join_repr(l.items) + (l.items.size() == 1 ? ",)" : ")");
    case ListKind::kDictKeys: return "dict_keys([" + join_repr(l.items) + "])";
    case ListKind::kDictValues: return "dict_values([" + join_repr(l.items) + "])";
    case ListKind::kDictItems: return "dict_items([" + join_repr(l.items) + "])";
    case ListKind::kRange: {
      std::string out = "range(" + std::to_string(l.start) + ", " + std::to_string(l.stop);
      if (l.step != 1) out += ", " + std::to_string(l.step);
      return out + ")";
    }
  }
  return "";
}

// Numeric equality with Python's exact int/float comparison.
bool num_equals(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float()) return a.as_int() == b.as_int();
  if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
  const double f = a.is_float() ? a.as_float() : b.as_float();
  const int64_t i = a.is_float() ? b.as_int() : a.as_int();
  if (!std::isfinite(f) || f != std::trunc(f) || std::fabs(f) >= 9.3e18) return false;
  return static_cast<int64_t>(f) == i;
}

int num_compare(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float()) {
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  const double x = a.as_float(), y = b.as_float();
  return x < y ? -1 : x > y ? 1 : 0;
}

bool is_sequence_kind(const Value& v, ListKind k) { return v.is_list() && v.list().kind == k; }

}  // namespace

Value::Value() : v_(Undef{}) {}
Value Value::undefined(std::string message, bool security) {
  Value v;
  v.v_ = Undef{std::make_shared<const std::string>(std::move(message)), security};
  return v;
}
Value Value::none() { Value v; v.v_ = None{}; return v; }
Value Value::boolean(bool b) { Value v; v.v_ = b; return v; }
Value Value::integer(int64_t i) { Value v; v.v_ = i; return v; }
Value Value::number(double d) { Value v; v.v_ = d; return v; }
Value Value::string(std::string s) {
  Value v;
  v.v_ = Str{std::make_shared<const std::string>(std::move(s)), false};
  return v;
}
Value Value::markup(std::string s) {
  Value v;
  v.v_ = Str{std::make_shared<const std::string>(std::move(s)), true};
  return v;
}
Value Value::list(std::vector<Value> items, ListKind kind) {
  auto d = std::make_shared<ListData>();
  d->items = std::move(items);
  d->kind = kind;
  Value v;
  v.v_ = std::shared_ptr<const ListData>(std::move(d));
  return v;
}
Value Value::tuple(std::vector<Value> items) { return list(std::move(items), ListKind::kTuple); }
Value Value::range(int64_t start, int64_t stop, int64_t step) {
  auto d = std::make_shared<ListData>();
  d->kind = ListKind::kRange;
  d->start = start, d->stop = stop, d->step = step;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    d->items.push_back(integer(i));
  }
  Value v;
  v.v_ = std::shared_ptr<const ListData>(std::move(d));
  return v;
}
Value Value::dict(Dict d) {
  Value v;
  v.v_ = std::shared_ptr<const Dict>(std::make_shared<Dict>(std::move(d)));
  return v;
}
Value Value::object(std::shared_ptr<Object> o) { Value v; v.v_ = std::move(o); return v; }
Value Value::callable(std::shared_ptr<const Callable> c) { Value v; v.v_ = std::move(c); return v; }
Value Value::iterator(std::shared_ptr<IterState> it) { Value v; v.v_ = std::move(it); return v; }

const std::string& Value::undefined_message() const {
  const auto& u = std::get<Undef>(v_);
  return u.message ? *u.message : default_undefined_message();
}
bool Value::undefined_is_security() const { return std::get<Undef>(v_).security; }
bool Value::as_bool() const { return std::get<bool>(v_); }
int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(v_);
}
double Value::as_float() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}
const std::string& Value::str() const { return *std::get<Str>(v_).s; }
bool Value::is_markup() const { return is_string() && std::get<Str>(v_).markup; }
const ListData& Value::list() const { return *std::get<std::shared_ptr<const ListData>>(v_); }
const std::vector<Value>& Value::items() const { return list().items; }
const Dict& Value::dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
Object& Value::object() const { return *std::get<std::shared_ptr<Object>>(v_); }
const Callable& Value::callable() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
IterState& Value::iter() const { return *std::get<std::shared_ptr<IterState>>(v_); }
const void* Value::identity() const {
  switch (kind()) {
    case Kind::kString: return std::get<Str>(v_).s.get();
    case Kind::kList: return std::get<std::shared_ptr<const ListData>>(v_).get();
    case Kind::kDict: return std::get<std::shared_ptr<const Dict>>(v_).get();
    case Kind::kObject: return std::get<std::shared_ptr<Object>>(v_).get();
    case Kind::kCallable: return std::get<std::shared_ptr<const Callable>>(v_).get();
    case Kind::kIterator: return std::get<std::shared_ptr<IterState>>(v_).get();
    default: return nullptr;
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& e : entries_) {
    if (equals(e.first, key)) return &e.second;
  }
  return nullptr;
}
const Value* Dict::find(std::string_view key) const {
  for (const auto& e : entries_) {
    if (e.first.is_string() && e.first.str() == key) return &e.second;
  }
  return nullptr;
}
void Dict::set(Value key, Value value) {
  for (auto& e : entries_) {
    if (equals(e.first, key)) { e.second = std::move(value); return; }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}
bool Dict::erase(const Value& key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (equals(it->first, key)) { entries_.erase(it); return true; }
  }
  return false;
}

Result<std::vector<Value>> IterState::drain() {
  std::vector<Value> out(items.begin() + static_cast<std::ptrdiff_t>(pos), items.end());
  pos = items.size();
  if (error) {
    Error e = *error;
    error.reset();
    return e;
  }
  return out;
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: return v.as_bool();
    case Kind::kInt: return v.as_int() != 0;
    case Kind::kFloat: return v.as_float() != 0.0;
    case Kind::kString: return !v.str().empty();
    case Kind::kList: return !v.items().empty();
    case Kind::kDict: return !v.dict().empty();
    default: return true;
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // [-]d[.ddd]e[+-]xx
  std::string out;
  if (sci[0] == '-') { out = "-"; sci.erase(0, 1); }
  const size_t e = sci.find('e');
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int decpt = exp10 + 1;
  if (decpt > 16 || decpt <= -4) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int ax = std::abs(exp10);
    out += std::string("e") + (exp10 < 0 ? "-" : "+") + (ax < 10 ? "0" : "") + std::to_string(ax);
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(v.as_int());
    case Kind::kFloat: return float_repr(v.as_float());
    case Kind::kString:
      return v.is_markup() ? "Markup(" + pystr::repr(v.str()) + ")" : pystr::repr(v.str());
    case Kind::kList: return list_repr(v.list());
    case Kind::kDict: return dict_repr(v.dict());
    case Kind::kObject: {
      const Object& o = v.object();
      if (o.type_name == "LoopContext") {
        const Value* i = o.attrs.find("index");
        const Value* n = o.attrs.find("length");
        return "<LoopContext " + (i ? repr(*i) : "?") + "/" + (n ? repr(*n) : "?") + ">";
      }
      return "<" + o.type_name + " " + dict_repr(o.attrs) + ">";
    }
    case Kind::kCallable: return "<function " + v.callable().name + ">";
    case Kind::kIterator: return "<" + v.iter().type_name + " object>";
  }
  return "";
}

std::string to_str(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.is_string()) return v.str();
  return repr(v);
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return v.is_markup() ? "Markup" : "str";
    case Kind::kList:
      switch (v.list().kind) {
        case ListKind::kList: return "list";
        case ListKind::kTuple: return "tuple";
        case ListKind::kDictKeys: return "dict_keys";
        case ListKind::kDictValues: return "dict_values";
        case ListKind::kDictItems: return "dict_items";
        case ListKind::kRange: return "range";
      }
      return "list";
    case Kind::kDict: return "dict";
    case Kind::kObject: return v.object().type_name;
    case Kind::kCallable: return "builtin_function_or_method";
    case Kind::kIterator: return v.iter().type_name;
  }
  return "object";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return num_equals(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined: case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      const ListData& x = a.list();
      const ListData& y = b.list();
      const bool x_tuple = x.kind == ListKind::kTuple, y_tuple = y.kind == ListKind::kTuple;
      if (x_tuple != y_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

Result<int> compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return num_compare(a, b);
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  const bool lists = (is_sequence_kind(a, ListKind::kList) && is_sequence_kind(b, ListKind::kList)) ||
                     (is_sequence_kind(a, ListKind::kTuple) && is_sequence_kind(b, ListKind::kTuple));
  if (lists) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined() || b.is_undefined()) return undefined_error(a.is_undefined() ? a : b);
  return make_error("'<' not supported between instances of '" + type_name(a) + "' and '" +
                    type_name(b) + "'");
}

Result<std::vector<Value>> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return std::vector<Value>{};
    case Kind::kList: return v.items();
    case Kind::kString: {
      std::vector<Value> out;
      const std::u32string cps = pystr::decode(v.str());
      out.reserve(cps.size());
      for (char32_t c : cps) out.push_back(Value::string(pystr::encode(std::u32string(1, c))));
      return out;
    }
    case Kind::kDict: {
      std::vector<Value> out;
      for (const auto& e : v.dict().entries()) out.push_back(e.first);
      return out;
    }
    case Kind::kIterator: return v.iter().drain();
    default: return make_error("'" + type_name(v) + "' object is not iterable");
  }
}

Result<int64_t> length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return int64_t{0};
    case Kind::kString: return pystr::length(v.str());
    case Kind::kList: return static_cast<int64_t>(v.items().size());
    case Kind::kDict: return static_cast<int64_t>(v.dict().size());
    default: return make_error("object of type '" + type_name(v) + "' has no len()");
  }
}

bool is_hashable(const Value& v) {
  if (v.is_dict()) return false;
  if (!v.is_list()) return true;
  const ListKind k = v.list().kind;
  if (k == ListKind::kRange) return true;
  if (k != ListKind::kTuple) return false;
  for (const Value& x : v.items()) {
    if (!is_hashable(x)) return false;
  }
  return true;
}

Error undefined_error(const Value& v) { return make_error(v.undefined_message()); }

Result<std::vector<Value>> bind_args(std::string_view fn, const CallArgs& a,
                                     std::initializer_list<Param> params) {
  const std::vector<Param> ps(params);
  std::vector<std::optional<Value>> slots(ps.size());
  if (a.args.size() > ps.size()) {
    return make_error(std::string(fn) + "() takes at most " + std::to_string(ps.size()) +
                      " argument(s) (" + std::to_string(a.args.size()) + " given)");
  }
  for (size_t i = 0; i < a.args.size(); ++i) slots[i] = a.args[i];
  for (const auto& [name, value] : a.kwargs) {
    size_t i = 0;
    while (i < ps.size() && name != ps[i].name) ++i;
    if (i == ps.size()) {
      return make_error(std::string(fn) + "() got an unexpected keyword argument '" + name + "'");
    }
    if (slots[i]) {
      return make_error(std::string(fn) + "() got multiple values for argument '" + name + "'");
    }
    slots[i] = value;
  }
  std::vector<Value> out;
  out.reserve(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!slots[i] && !ps[i].def) {
      return make_error(std::string(fn) + "() missing required argument '" + ps[i].name + "'");
    }
    out.push_back(slots[i] ? *slots[i] : *ps[i].def);
  }
  return out;
}

}  // namespace pagoda::model::jinja
