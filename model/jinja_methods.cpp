// Attribute/item access and dict/list methods (see jinja_methods.hpp); the
// str methods live in jinja_str_methods.cpp.
#include "model/jinja_methods.hpp"

#include <algorithm>
#include <array>

#include "model/jinja_str_methods.hpp"
#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

constexpr std::array<std::string_view, 5> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::array<std::string_view, 6> kDictMethods = {"get", "items", "keys", "values", "copy", "fromkeys"};
constexpr std::array<std::string_view, 8> kListUnsafe = {"append", "clear", "extend", "insert",
                                                         "pop", "remove", "reverse", "sort"};
constexpr std::array<std::string_view, 3> kListMethods = {"index", "count", "copy"};

template <size_t N>
bool one_of(const std::array<std::string_view, N>& set, std::string_view name) {
  return std::find(set.begin(), set.end(), name) != set.end();
}

std::string object_desc(const Value& obj) {
  if (obj.is_none()) return "None";
  return type_name(obj) + " object";
}

Value missing(const Value& obj, std::string_view name) {
  return Value::undefined("'" + object_desc(obj) + "' has no attribute '" + std::string(name) + "'");
}

Value missing_item(const Value& obj, const Value& key) {
  return Value::undefined("'" + object_desc(obj) + "' has no attribute " + repr(key));
}

Value unsafe(const Value& obj, std::string_view name) {
  return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) +
                              "' object is unsafe.",
                          true);
}

Value dict_view(const Dict& d, ListKind kind) {
  std::vector<Value> out;
  out.reserve(d.size());
  for (const auto& [k, v] : d.entries()) {
    if (kind == ListKind::kDictKeys) out.push_back(k);
    else if (kind == ListKind::kDictValues) out.push_back(v);
    else out.push_back(Value::tuple({k, v}));
  }
  return Value::list(std::move(out), kind);
}

Result<Value> dict_method(const Value& self, std::string_view name, const CallArgs& a) {
  const Dict& d = self.dict();
  if (name == "get") {
    auto p = bind_args("get", a, {{"key", std::nullopt}, {"default", Value::none()}});
    if (!p) return p.error();
    if (!is_hashable((*p)[0])) return make_error("unhashable type: '" + type_name((*p)[0]) + "'");
    const Value* v = d.find((*p)[0]);
    return v ? *v : (*p)[1];
  }
  if (name == "fromkeys") return make_error("dict.fromkeys() on a dict value is not supported");
  auto p = bind_args(name, a, {});
  if (!p) return p.error();
  if (name == "items") return dict_view(d, ListKind::kDictItems);
  if (name == "keys") return dict_view(d, ListKind::kDictKeys);
  if (name == "values") return dict_view(d, ListKind::kDictValues);
  return self;  // copy(): values are immutable, sharing is a copy
}

Result<Value> list_method(const Value& self, std::string_view name, const CallArgs& a) {
  const auto& items = self.items();
  if (name == "copy") {
    auto p = bind_args("copy", a, {});
    if (!p) return p.error();
    return Value::list(items, self.list().kind);
  }
  auto p = bind_args(name, a, {{"value", std::nullopt}});
  if (!p) return p.error();
  int64_t n = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], (*p)[0])) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(i));
    ++n;
  }
  if (name == "index") return make_error(repr((*p)[0]) + " is not in list");
  return Value::integer(n);
}

Value bind(const Value& self, std::string_view name) {
  auto c = std::make_shared<Callable>();
  c->name = std::string(name);
  c->fn = [self, method = std::string(name)](const CallArgs& a) -> Result<Value> {
    if (self.is_string()) return call_str_method(self, method, a);
    if (self.is_dict()) return dict_method(self, method, a);
    return list_method(self, method, a);
  };
  return Value::callable(std::move(c));
}

// dict.fromkeys of the `dict` global.
Value dict_fromkeys() {
  auto c = std::make_shared<Callable>();
  c->name = "fromkeys";
  c->fn = [](const CallArgs& a) -> Result<Value> {
    auto p = bind_args("fromkeys", a, {{"iterable", std::nullopt}, {"value", Value::none()}});
    if (!p) return p.error();
    auto keys = iterate((*p)[0]);
    if (!keys) return keys.error();
    Dict d;
    for (Value& k : *keys) {
      if (!is_hashable(k)) return make_error("unhashable type: '" + type_name(k) + "'");
      d.set(std::move(k), (*p)[1]);
    }
    return Value::dict(std::move(d));
  };
  return Value::callable(std::move(c));
}

// Python slice bounds -> the indices it selects.
Result<std::vector<int64_t>> slice_indices(int64_t len, const Value& start, const Value& stop,
                                           const Value& step) {
  const int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) return make_error("slice step cannot be zero");
  const int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? len : len - 1;
  auto adjust = [&](const Value& v, int64_t def) {
    if (v.is_none()) return def;
    const int64_t x = v.as_int();
    return x < 0 ? std::max(x + len, lower) : std::min(x, upper);
  };
  const int64_t b = adjust(start, st > 0 ? lower : upper);
  const int64_t e = adjust(stop, st > 0 ? upper : lower);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  return idx;
}

bool is_index(const Value& v) { return v.is_int() || v.is_bool(); }

}  // namespace

bool is_known_method(std::string_view name) {
  return one_of(kDictUnsafe, name) || one_of(kDictMethods, name) || one_of(kListUnsafe, name) ||
         one_of(kListMethods, name) || is_str_method(name) || name == "cycle" || name == "changed";
}

Result<Value> get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (name.substr(0, 2) == "__") return unsafe(obj, name);  // Python internals
  switch (obj.kind()) {
    case Kind::kDict: {
      if (one_of(kDictUnsafe, name)) return unsafe(obj, name);
      if (one_of(kDictMethods, name)) return bind(obj, name);
      const Value* v = obj.dict().find(name);
      return v ? *v : missing(obj, name);
    }
    case Kind::kString:
      return is_python_str_attr(name) ? bind(obj, name) : missing(obj, name);
    case Kind::kList: {
      const ListKind k = obj.list().kind;
      if (k == ListKind::kList && one_of(kListUnsafe, name)) return unsafe(obj, name);
      const bool tuple_like = k == ListKind::kTuple || k == ListKind::kRange;
      if ((k == ListKind::kList && one_of(kListMethods, name)) ||
          (tuple_like && (name == "index" || name == "count"))) {
        return bind(obj, name);
      }
      return missing(obj, name);
    }
    case Kind::kObject: {
      const Value* v = obj.object().attrs.find(name);
      return v ? *v : missing(obj, name);
    }
    case Kind::kCallable:
      if (obj.callable().name == "dict" && name == "fromkeys") return dict_fromkeys();
      return missing(obj, name);
    default:
      return missing(obj, name);
  }
}

Result<Value> get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined: return undefined_error(obj);
    case Kind::kDict: {
      if (is_hashable(key)) {
        if (const Value* v = obj.dict().find(key)) return *v;
      }
      break;
    }
    case Kind::kList: {
      const ListKind k = obj.list().kind;
      const bool indexable = k == ListKind::kList || k == ListKind::kTuple || k == ListKind::kRange;
      if (indexable && is_index(key)) {
        const auto& items = obj.items();
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(items.size());
        if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[static_cast<size_t>(i)];
      }
      break;
    }
    case Kind::kString: {
      if (is_index(key)) {
        const std::u32string cps = pystr::decode(obj.str());
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(cps.size());
        if (i >= 0 && i < static_cast<int64_t>(cps.size())) {
          return Value::string(pystr::encode(std::u32string(1, cps[static_cast<size_t>(i)])));
        }
      }
      break;
    }
    default: break;
  }
  if (key.is_string()) {
    auto attr = get_attr(obj, key.str());
    if (!attr) return attr;
    if (!attr->is_undefined() || attr->undefined_is_security()) return attr;
  }
  return missing_item(obj, key);
}

Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop,
                        const Value& step) {
  if (obj.is_undefined()) return undefined_error(obj);
  for (const Value* b : {&start, &stop, &step}) {
    if (!b->is_none() && !is_index(*b)) {
      return make_error("slice indices must be integers or None or have an __index__ method");
    }
  }
  const bool seq = obj.is_list() && (obj.list().kind == ListKind::kList ||
                                     obj.list().kind == ListKind::kTuple ||
                                     obj.list().kind == ListKind::kRange);
  if (obj.is_string()) {
    const std::u32string cps = pystr::decode(obj.str());
    auto idx = slice_indices(static_cast<int64_t>(cps.size()), start, stop, step);
    if (!idx) return idx.error();
    std::u32string out;
    for (int64_t i : *idx) out.push_back(cps[static_cast<size_t>(i)]);
    return Value::string(pystr::encode(out));
  }
  if (!seq) return make_error("'" + type_name(obj) + "' object cannot be sliced");
  const auto& items = obj.items();
  auto idx = slice_indices(static_cast<int64_t>(items.size()), start, stop, step);
  if (!idx) return idx.error();
  std::vector<Value> out;
  for (int64_t i : *idx) out.push_back(items[static_cast<size_t>(i)]);
  const ListKind k = obj.list().kind == ListKind::kTuple ? ListKind::kTuple : ListKind::kList;
  return Value::list(std::move(out), k);
}

}  // namespace pagoda::model::jinja
