// Jinja filters on sequences and mappings (see jinja_filters.hpp). Filters
// that are generators in jinja2 return one-shot iterators whose errors are
// deferred until consumption, like a lazy generator's.
#include <algorithm>

#include "model/jinja_filter_table.hpp"
#include "model/jinja_filters.hpp"
#include "model/jinja_methods.hpp"
#include "model/jinja_operators.hpp"
#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

Value lazy(std::vector<Value> items, std::optional<Error> err = std::nullopt,
           const char* type = "generator") {
  auto it = std::make_shared<IterState>();
  it->items = std::move(items);
  it->error = std::move(err);
  it->type_name = type;
  return Value::iterator(std::move(it));
}

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(pystr::lower(v.str())) : v;
}

// jinja2's make_attrgetter: "a.b.0" -> item["a"]["b"][0] with getitem rules.
Result<Value> attr_path(Value item, const Value& attribute, const std::optional<Value>& def = {}) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const std::string& p : pystr::split(attribute.str(), std::string("."), -1)) {
      const bool digits = !p.empty() && p.size() < 18 &&
                          std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts.push_back(digits ? Value::integer(std::stoll(p)) : Value::string(p));
    }
  } else if (!attribute.is_none()) {
    parts.push_back(attribute);
  }
  for (const Value& part : parts) {
    auto r = get_item(item, part);
    if (!r) return r;
    item = *r;
    if (def && !def->is_none() && item.is_undefined()) item = *def;
  }
  return item;
}

// Sort key of jinja2's make_multi_attrgetter ("age,name"), or the item.
Result<std::vector<Value>> sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  std::vector<Value> key;
  std::vector<Value> attrs;
  if (attribute.is_string()) {
    for (const std::string& p : pystr::split(attribute.str(), std::string(","), -1)) attrs.push_back(Value::string(p));
  } else {
    attrs.push_back(attribute);
  }
  for (const Value& a : attrs) {
    auto v = attr_path(item, a);
    if (!v) return v.error();
    key.push_back(case_sensitive ? *v : ignore_case(*v));
  }
  return key;
}

Result<int> compare_keys(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (equals(a[i], b[i])) continue;
    return compare(a[i], b[i]);
  }
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

// Stable sort of items by precomputed keys; the first comparison error wins.
Result<std::vector<Value>> sorted_by(std::vector<Value> items, std::vector<std::vector<Value>> keys,
                                     bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::optional<Error> err;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (err) return false;
    auto c = reverse ? compare_keys(keys[y], keys[x]) : compare_keys(keys[x], keys[y]);
    if (!c) { err = c.error(); return false; }
    return *c < 0;
  });
  if (err) return *err;
  std::vector<Value> out;
  for (size_t i : order) out.push_back(items[i]);
  return out;
}

Result<Value> f_sort(const Value& v, const CallArgs& a) {
  auto p = bind_args("sort", a, {{"reverse", Value::boolean(false)}, {"case_sensitive", Value::boolean(false)},
                                 {"attribute", Value::none()}});
  if (!p) return p.error();
  auto items = iterate(v);
  if (!items) return items.error();
  std::vector<std::vector<Value>> keys;
  for (const Value& item : *items) {
    auto k = sort_key(item, (*p)[2], truthy((*p)[1]));
    if (!k) return k.error();
    keys.push_back(std::move(*k));
  }
  auto out = sorted_by(std::move(*items), std::move(keys), truthy((*p)[0]));
  if (!out) return out.error();
  return Value::list(std::move(*out));
}

Result<Value> f_dictsort(const Value& v, const CallArgs& a) {
  auto p = bind_args("dictsort", a, {{"case_sensitive", Value::boolean(false)}, {"by", Value::string("key")},
                                     {"reverse", Value::boolean(false)}});
  if (!p) return p.error();
  const std::string by = to_str((*p)[1]);
  if (by != "key" && by != "value") return make_error("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) return make_error("dictsort needs a mapping, got " + type_name(v));
  std::vector<Value> items;
  std::vector<std::vector<Value>> keys;
  for (const auto& [k, val] : v.dict().entries()) {
    items.push_back(Value::tuple({k, val}));
    const Value& key = by == "key" ? k : val;
    keys.push_back({truthy((*p)[0]) ? key : ignore_case(key)});
  }
  auto out = sorted_by(std::move(items), std::move(keys), truthy((*p)[2]));
  if (!out) return out.error();
  return Value::list(std::move(*out));
}

// select/reject/selectattr/rejectattr.
Value select_or_reject(const Value& v, const CallArgs& a, bool reject, bool lookup_attr) {
  if (!truthy(v)) return lazy({});
  auto items = iterate(v);
  if (!items) return lazy({}, items.error());
  size_t off = 0;
  Value attr;
  if (lookup_attr) {
    if (a.args.empty()) return lazy({}, make_error("Missing parameter for attribute name"));
    attr = a.args[0];
    off = 1;
  }
  const bool has_test = a.args.size() > off;
  CallArgs test_args;
  if (has_test) test_args.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(off) + 1, a.args.end());
  test_args.kwargs = a.kwargs;
  std::vector<Value> out;
  for (const Value& item : *items) {
    Value x = item;
    if (lookup_attr) {
      auto r = attr_path(item, attr);
      if (!r) return lazy(std::move(out), r.error());
      x = *r;
    }
    bool keep = truthy(x);
    if (has_test) {
      if (!a.args[off].is_string()) return lazy(std::move(out), make_error("test name must be a string"));
      auto r = apply_test(a.args[off].str(), x, test_args);
      if (!r) return lazy(std::move(out), r.error());
      keep = *r;
    }
    if (keep != reject) out.push_back(item);
  }
  return lazy(std::move(out));
}

Result<Value> f_map(const Value& v, const CallArgs& a) {
  if (!truthy(v)) return lazy({});
  auto items = iterate(v);
  if (!items) return lazy({}, items.error());
  std::optional<Value> attribute, def;
  CallArgs fargs;
  if (a.args.empty()) {
    for (const auto& [k, val] : a.kwargs) {
      if (k == "attribute") attribute = val;
      else if (k == "default") def = val;
      else return lazy({}, make_error("Unexpected keyword argument '" + k + "'"));
    }
    if (!attribute) return lazy({}, make_error("map requires a filter argument"));
  } else {
    fargs.args.assign(a.args.begin() + 1, a.args.end());
    fargs.kwargs = a.kwargs;
  }
  std::vector<Value> out;
  for (const Value& item : *items) {
    Result<Value> r = attribute ? attr_path(item, *attribute, def)
                                : (a.args[0].is_string() ? apply_filter(a.args[0].str(), item, fargs)
                                                         : Result<Value>(make_error("filter name must be a string")));
    if (!r) return lazy(std::move(out), r.error());
    out.push_back(std::move(*r));
  }
  return lazy(std::move(out));
}

Result<Value> f_first(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("first", a, {}); !p) return p.error();
  if (v.is_iterator()) {
    IterState& it = v.iter();
    if (it.pos < it.items.size()) return it.items[it.pos++];
    if (it.error) { Error e = *it.error; it.error.reset(); return e; }
  } else {
    auto items = iterate(v);
    if (!items) return items.error();
    if (!items->empty()) return items->front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Result<Value> f_last(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("last", a, {}); !p) return p.error();
  if (!(v.is_list() || v.is_string() || v.is_dict() || v.is_undefined())) {
    return make_error("'" + type_name(v) + "' object is not reversible");
  }
  auto items = iterate(v);
  if (!items) return items.error();
  if (!items->empty()) return items->back();
  return Value::undefined("No last item, sequence was empty.");
}

Result<Value> f_join(const Value& v, const CallArgs& a) {
  auto p = bind_args("join", a, {{"d", Value::string("")}, {"attribute", Value::none()}});
  if (!p) return p.error();
  auto items = iterate(v);
  if (!items) return items.error();
  const std::string sep = to_str((*p)[0]);
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    Value x = (*items)[i];
    if (!(*p)[1].is_none()) {
      auto r = attr_path(x, (*p)[1]);
      if (!r) return r;
      x = *r;
    }
    if (i) out += sep;
    out += to_str(x);
  }
  return Value::string(std::move(out));
}

Result<Value> f_reverse(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("reverse", a, {}); !p) return p.error();
  if (v.is_string()) {
    std::u32string cps = pystr::decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(pystr::encode(cps));
  }
  const bool reversible = v.is_list() || v.is_dict() || v.is_undefined();
  if (!reversible && !v.is_iterator()) return make_error("argument must be iterable");
  auto items = iterate(v);
  if (!items) return items.error();
  std::reverse(items->begin(), items->end());
  if (!reversible) return Value::list(std::move(*items));  // list(value).reverse()
  return lazy(std::move(*items), std::nullopt, "reversed");
}

Result<Value> f_unique(const Value& v, const CallArgs& a) {
  auto p = bind_args("unique", a, {{"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
  if (!p) return p.error();
  auto items = iterate(v);
  if (!items) return lazy({}, items.error());
  std::vector<Value> out, seen;
  for (const Value& item : *items) {
    auto key = attr_path(item, (*p)[1]);
    if (!key) return lazy(std::move(out), key.error());
    const Value k = truthy((*p)[0]) ? *key : ignore_case(*key);
    if (!is_hashable(k)) return lazy(std::move(out), make_error("unhashable type: '" + type_name(k) + "'"));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return lazy(std::move(out));
}

Result<Value> min_max(const Value& v, const CallArgs& a, bool want_max) {
  auto p = bind_args(want_max ? "max" : "min", a, {{"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
  if (!p) return p.error();
  auto items = iterate(v);
  if (!items) return items.error();
  if (items->empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items->size(); ++i) {
    auto key = attr_path((*items)[i], (*p)[1]);
    if (!key) return key;
    const Value k = truthy((*p)[0]) ? *key : ignore_case(*key);
    if (i > 0) {
      auto c = compare(k, best_key);
      if (!c) return c.error();
      if (!(want_max ? *c > 0 : *c < 0)) continue;
    }
    best = i;
    best_key = k;
  }
  return (*items)[best];
}

Result<Value> f_sum(const Value& v, const CallArgs& a) {
  auto p = bind_args("sum", a, {{"attribute", Value::none()}, {"start", Value::integer(0)}});
  if (!p) return p.error();
  auto items = iterate(v);
  if (!items) return items.error();
  if ((*p)[1].is_string()) return make_error("sum() can't sum strings [use ''.join(seq) instead]");
  Value total = (*p)[1];
  for (const Value& item : *items) {
    auto x = attr_path(item, (*p)[0]);
    if (!x) return x;
    auto r = binary_op(BinOp::kAdd, total, *x);
    if (!r) return r;
    total = *r;
  }
  return total;
}

Result<Value> f_batch(const Value& v, const CallArgs& a) {
  auto p = bind_args("batch", a, {{"linecount", std::nullopt}, {"fill_with", Value::none()}});
  if (!p) return p.error();
  const int64_t n = (*p)[0].as_int();
  if (n <= 0) return make_error("batch: linecount must be positive");
  auto items = iterate(v);
  if (!items) return lazy({}, items.error());
  std::vector<Value> out, row;
  for (const Value& item : *items) {
    if (static_cast<int64_t>(row.size()) == n) { out.push_back(Value::list(std::move(row))); row.clear(); }
    row.push_back(item);
  }
  if (!row.empty()) {
    while (!(*p)[1].is_none() && static_cast<int64_t>(row.size()) < n) row.push_back((*p)[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return lazy(std::move(out));
}

Result<Value> f_items(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("items", a, {}); !p) return p.error();
  if (v.is_undefined()) return lazy({});
  if (!v.is_dict()) return lazy({}, make_error("Can only get item pairs from a mapping."));
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().entries()) out.push_back(Value::tuple({k, val}));
  return lazy(std::move(out));
}

Result<Value> f_list(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("list", a, {}); !p) return p.error();
  auto items = iterate(v);
  if (!items) return items.error();
  return Value::list(std::move(*items));
}

constexpr FilterEntry kSeq[] = {
    {"sort", f_sort}, {"dictsort", f_dictsort}, {"map", f_map}, {"first", f_first},
    {"last", f_last}, {"join", f_join}, {"reverse", f_reverse}, {"unique", f_unique},
    {"sum", f_sum}, {"batch", f_batch}, {"items", f_items}, {"list", f_list},
    {"max", [](const Value& v, const CallArgs& a) { return min_max(v, a, true); }},
    {"min", [](const Value& v, const CallArgs& a) { return min_max(v, a, false); }},
    {"select", [](const Value& v, const CallArgs& a) -> Result<Value> { return select_or_reject(v, a, false, false); }},
    {"reject", [](const Value& v, const CallArgs& a) -> Result<Value> { return select_or_reject(v, a, true, false); }},
    {"selectattr", [](const Value& v, const CallArgs& a) -> Result<Value> { return select_or_reject(v, a, false, true); }},
    {"rejectattr", [](const Value& v, const CallArgs& a) -> Result<Value> { return select_or_reject(v, a, true, true); }},
};

}  // namespace

std::span<const FilterEntry> sequence_filters() { return kSeq; }

}  // namespace pagoda::model::jinja
