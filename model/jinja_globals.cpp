// Jinja interpreter: the globals of transformers' chat-template environment
// (see jinja_interpreter.hpp).
#include <ctime>

#include "model/jinja_interp_state.hpp"

namespace pagoda::model::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value make_callable(std::string name, std::function<Result<Value>(const CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return Value::callable(std::move(c));
}

Result<Value> range_fn(const CallArgs& a) {
  if (!a.kwargs.empty()) return make_error("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3) {
    return make_error("range expected 1 to 3 arguments, got " + std::to_string(a.args.size()));
  }
  for (const Value& v : a.args) {
    if (!v.is_int() && !v.is_bool()) {
      return make_error("'" + type_name(v) + "' object cannot be interpreted as an integer");
    }
  }
  const int64_t start = a.args.size() == 1 ? 0 : a.args[0].as_int();
  const int64_t stop = a.args.size() == 1 ? a.args[0].as_int() : a.args[1].as_int();
  const int64_t step = a.args.size() == 3 ? a.args[2].as_int() : 1;
  if (step == 0) return make_error("range() arg 3 must not be zero");
  const long double n = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                 : (static_cast<long double>(start) - stop - step - 1) / -step;
  if (n > kMaxRange) {
    return make_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  return Value::range(start, stop, step);
}

// dict(*args, **kwargs) as Python builds it (also namespace()'s attributes).
Result<Dict> dict_from_args(const CallArgs& a, const char* fn) {
  if (a.args.size() > 1) {
    return make_error(std::string(fn) + " expected at most 1 positional argument, got " +
                      std::to_string(a.args.size()));
  }
  Dict d;
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      auto pairs = iterate(src);
      if (!pairs) return pairs.error();
      for (const Value& p : *pairs) {
        auto kv = iterate(p);
        if (!kv) return kv.error();
        if (kv->size() != 2) return make_error("dictionary update sequence element has wrong length");
        if (!is_hashable((*kv)[0])) return make_error("unhashable type: '" + type_name((*kv)[0]) + "'");
        d.set((*kv)[0], (*kv)[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs) d.set(Value::string(k), v);
  return d;
}

std::string format_time(const std::string& fmt, const std::tm& tm) {
  if (fmt.empty()) return "";
  std::string buf(fmt.size() * 4 + 64, '\0');
  for (int attempt = 0; attempt < 8; ++attempt) {
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) return buf.substr(0, n);
    buf.resize(buf.size() * 4);
  }
  return "";
}

}  // namespace

void Interpreter::install_globals(std::unordered_map<std::string, Value>& vars) {
  vars["range"] = make_callable("range", range_fn);
  vars["dict"] = make_callable("dict", [](const CallArgs& a) -> Result<Value> {
    auto d = dict_from_args(a, "dict");
    if (!d) return d.error();
    return Value::dict(std::move(*d));
  });
  vars["namespace"] = make_callable("namespace", [this](const CallArgs& a) -> Result<Value> {
    auto d = dict_from_args(a, "namespace");
    if (!d) return d.error();
    for (const auto& [k, v] : d->entries()) {
      if (k.is_string() && !k.str().empty() && k.str()[0] == '_') {
        return make_error("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                          k.str() + "'. Please rename the attribute.");
      }
    }
    auto o = std::make_shared<Object>();
    o->type_name = "Namespace";
    o->attrs = std::move(*d);
    objects_.push_back(o);
    return Value::object(std::move(o));
  });
  vars["raise_exception"] = make_callable("raise_exception", [this](const CallArgs& a) -> Result<Value> {
    auto p = bind_args("raise_exception", a, {{"message", std::nullopt}});
    if (!p) return p.error();
    raised_ = true;
    return make_error(to_str((*p)[0]));
  });
  vars["strftime_now"] = make_callable("strftime_now", [this](const CallArgs& a) -> Result<Value> {
    auto p = bind_args("strftime_now", a, {{"format", std::nullopt}});
    if (!p) return p.error();
    if (!(*p)[0].is_string()) return make_error("strftime() argument 1 must be str");
    std::tm tm{};
    if (options_.now) {
      tm = *options_.now;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    return Value::string(format_time((*p)[0].str(), tm));
  });
}

}  // namespace pagoda::model::jinja
