// Python str methods (see jinja_str_methods.hpp).
#include "model/jinja_str_methods.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>

#include "model/jinja_methods.hpp"
#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

constexpr std::array<std::string_view, 9> kOtherAttrs = {
    "encode", "expandtabs", "format_map", "isascii", "isidentifier",
    "isprintable", "istitle", "maketrans", "translate"};
constexpr std::array<std::string_view, 13> kKeepsMarkup = {
    "capitalize", "title", "lower", "upper", "replace", "ljust", "rjust", "lstrip",
    "rstrip", "center", "strip", "swapcase", "zfill"};

Value none() { return Value::none(); }

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 18 && std::all_of(s.begin(), s.end(), [](char d) { return d >= '0' && d <= '9'; });
}
Value str_list(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

Result<std::string> need_str(const Value& v, const char* what) {
  if (v.is_string()) return v.str();
  return make_error(std::string(what) + " must be str, not " + type_name(v));
}

Result<std::optional<std::string>> opt_str(const Value& v, const char* what) {
  if (v.is_none()) return std::optional<std::string>();
  auto s = need_str(v, what);
  if (!s) return s.error();
  return std::optional<std::string>(*s);
}

// s[start:end] by code points, and the code-point offset where it begins.
std::pair<std::string, int64_t> window(const std::string& s, const Value& start, const Value& end) {
  if (start.is_none() && end.is_none()) return {s, 0};
  const std::u32string cps = pystr::decode(s);
  const auto n = static_cast<int64_t>(cps.size());
  auto clamp = [&](const Value& v, int64_t def) {
    if (v.is_none()) return def;
    int64_t x = v.as_int();
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  const int64_t b = clamp(start, 0), e = clamp(end, n);
  if (e <= b) return {std::string(), b};
  return {pystr::encode(std::u32string_view(cps).substr(static_cast<size_t>(b),
                                                        static_cast<size_t>(e - b))), b};
}

Result<Value> affix_test(const std::string& s, const std::vector<Value>& p, bool prefix) {
  const auto [w, off] = window(s, p[1], p[2]);
  std::vector<Value> options;
  if (p[0].is_list() && p[0].list().kind == ListKind::kTuple) options = p[0].items();
  else options.push_back(p[0]);
  for (const Value& o : options) {
    if (!o.is_string()) {
      return make_error(std::string(prefix ? "startswith" : "endswith") +
                        " first arg must be str or a tuple of str, not " + type_name(o));
    }
    const std::string& x = o.str();
    if (x.size() > w.size()) continue;
    if (prefix ? w.compare(0, x.size(), x) == 0 : w.compare(w.size() - x.size(), x.size(), x) == 0) {
      return Value::boolean(true);
    }
  }
  return Value::boolean(false);
}

Result<Value> search(const std::string& s, std::string_view name, const std::vector<Value>& p) {
  auto sub = need_str(p[0], "substring");
  if (!sub) return sub.error();
  const auto [w, off] = window(s, p[1], p[2]);
  if (name == "count") return Value::integer(pystr::count(w, *sub));
  const bool reverse = name == "rfind" || name == "rindex";
  const int64_t at = reverse ? pystr::rfind(w, *sub) : pystr::find(w, *sub);
  if (at < 0 && (name == "index" || name == "rindex")) return make_error("substring not found");
  return Value::integer(at < 0 ? -1 : at + off);
}

template <class Pred>
Value all_chars(const std::string& s, Pred pred) {
  const std::u32string cps = pystr::decode(s);
  return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), pred));
}


// str.format with the sandbox's field lookup (no format specs).
Result<Value> format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') { out.push_back('}'); ++i; continue; }
      return make_error("Single '}' encountered in format string");
    }
    if (c != '{') { out.push_back(c); continue; }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') { out.push_back('{'); ++i; continue; }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) return make_error("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conv = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      return make_error("format specs are not supported in str.format: '" + field + "'");
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) return make_error("invalid conversion in format string");
      conv = field[bang + 1];
      field.resize(bang);
    }
    const size_t chain = field.find_first_of(".[");
    const std::string head = field.substr(0, chain);
    Value v;
    if (head.empty() || all_digits(head)) {
      const size_t idx = head.empty() ? auto_index++ : static_cast<size_t>(std::atoll(head.c_str()));
      if (idx >= a.args.size()) return make_error("Replacement index " + std::to_string(idx) + " out of range");
      v = a.args[idx];
    } else {
      const auto it = std::find_if(a.kwargs.begin(), a.kwargs.end(), [&](const auto& kw) { return kw.first == head; });
      if (it == a.kwargs.end()) return make_error("KeyError: '" + head + "'");
      v = it->second;
    }
    for (size_t p = chain; p != std::string::npos && p < field.size();) {
      const bool attr = field[p] == '.';
      const size_t end = attr ? field.find_first_of(".[", p + 1) : field.find(']', p);
      if (!attr && end == std::string::npos) return make_error("Missing ']' in format string");
      const std::string part = field.substr(p + 1, (end == std::string::npos ? field.size() : end) - p - 1);
      const bool numeric = all_digits(part);
      auto r = attr ? get_attr(v, part)
                    : get_item(v, numeric ? Value::integer(std::atoll(part.c_str())) : Value::string(part));
      if (!r) return r.error();
      v = *r;
      p = attr ? end : end + 1;
    }
    if (conv == 'r' || conv == 'a') out += repr(v);
    else if (conv == 0 || conv == 's') out += to_str(v);
    else return make_error("Unknown conversion specifier " + std::string(1, conv));
  }
  return Value::string(std::move(out));
}

using Method = Result<Value> (*)(const std::string& s, std::string_view name, const CallArgs& a);

Result<Value> m_strip(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"chars", none()}});
  if (!p) return p.error();
  auto chars = opt_str((*p)[0], "strip arg");
  if (!chars) return chars.error();
  return Value::string(pystr::strip(s, *chars, name != "rstrip", name != "lstrip"));
}

Result<Value> m_split(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"sep", none()}, {"maxsplit", Value::integer(-1)}});
  if (!p) return p.error();
  auto sep = opt_str((*p)[0], "sep");
  if (!sep) return sep.error();
  if (*sep && (*sep)->empty()) return make_error("empty separator");
  const int64_t max = (*p)[1].as_int();
  return str_list(name == "split" ? pystr::split(s, *sep, max) : pystr::rsplit(s, *sep, max));
}

Result<Value> m_splitlines(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"keepends", Value::boolean(false)}});
  if (!p) return p.error();
  return str_list(pystr::splitlines(s, truthy((*p)[0])));
}

Result<Value> m_replace(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::integer(-1)}});
  if (!p) return p.error();
  auto old = need_str((*p)[0], "replace() argument 1");
  if (!old) return old.error();
  auto repl = need_str((*p)[1], "replace() argument 2");
  if (!repl) return repl.error();
  return Value::string(pystr::replace(s, *old, *repl, (*p)[2].as_int()));
}

Result<Value> m_affix(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"prefix", std::nullopt}, {"start", none()}, {"end", none()}});
  if (!p) return p.error();
  return affix_test(s, *p, name == "startswith");
}

Result<Value> m_search(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"sub", std::nullopt}, {"start", none()}, {"end", none()}});
  if (!p) return p.error();
  return search(s, name, *p);
}

Result<Value> m_pad(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"width", std::nullopt}, {"fillchar", Value::string(" ")}});
  if (!p) return p.error();
  auto fill = need_str((*p)[1], "fillchar");
  if (!fill || pystr::length(*fill) != 1) return make_error("The fill character must be exactly one character long");
  const int where = name == "center" ? 0 : name == "ljust" ? -1 : 1;
  return Value::string(pystr::pad(s, (*p)[0].as_int(), *fill, where));
}

Result<Value> m_join(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"iterable", std::nullopt}});
  if (!p) return p.error();
  auto items = iterate((*p)[0]);
  if (!items) return items.error();
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    const Value& v = (*items)[i];
    if (!v.is_string()) {
      return make_error("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(v) + " found");
    }
    if (i) out += s;
    out += v.str();
  }
  return Value::string(std::move(out));
}

Result<Value> m_partition(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"sep", std::nullopt}});
  if (!p) return p.error();
  auto sep = need_str((*p)[0], "argument");
  if (!sep) return sep.error();
  if (name == "removeprefix") return Value::string(s.rfind(*sep, 0) == 0 ? s.substr(sep->size()) : s);
  if (name == "removesuffix") {
    const bool has = s.size() >= sep->size() && s.compare(s.size() - sep->size(), sep->size(), *sep) == 0;
    return Value::string(has && !sep->empty() ? s.substr(0, s.size() - sep->size()) : s);
  }
  if (sep->empty()) return make_error("empty separator");
  const size_t at = name == "partition" ? s.find(*sep) : s.rfind(*sep);
  const Value empty = Value::string("");
  if (at == std::string::npos) {
    return name == "partition" ? Value::tuple({Value::string(s), empty, empty})
                               : Value::tuple({empty, empty, Value::string(s)});
  }
  return Value::tuple({Value::string(s.substr(0, at)), Value::string(*sep), Value::string(s.substr(at + sep->size()))});
}

Result<Value> m_zfill(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {{"width", std::nullopt}});
  if (!p) return p.error();
  const int64_t len = pystr::length(s), width = (*p)[0].as_int();
  if (width <= len) return Value::string(s);
  const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
  const std::string zeros(static_cast<size_t>(width - len), '0');
  return Value::string(sign ? s.substr(0, 1) + zeros + s.substr(1) : zeros + s);
}

Result<Value> m_no_args(const std::string& s, std::string_view name, const CallArgs& a) {
  auto p = bind_args(name, a, {});
  if (!p) return p.error();
  if (name == "upper") return Value::string(pystr::upper(s));
  if (name == "lower" || name == "casefold") return Value::string(pystr::lower(s));
  if (name == "title") return Value::string(pystr::title_method(s));
  if (name == "capitalize") return Value::string(pystr::capitalize(s));
  if (name == "swapcase") return Value::string(pystr::swapcase(s));
  if (name == "isdigit") return all_chars(s, pystr::is_digit);
  if (name == "isdecimal") return all_chars(s, pystr::is_decimal);
  if (name == "isnumeric") return all_chars(s, pystr::is_numeric);
  if (name == "isalpha") return all_chars(s, pystr::is_alpha);
  if (name == "isalnum") return all_chars(s, pystr::is_alnum);
  if (name == "isspace") return all_chars(s, pystr::is_space);
  if (name == "islower") return Value::boolean(pystr::islower(s));
  return Value::boolean(pystr::isupper(s));  // isupper
}

Result<Value> m_format(const std::string& s, std::string_view, const CallArgs& a) { return format(s, a); }

struct MethodEntry {
  std::string_view name;
  Method fn;
};

constexpr MethodEntry kMethods[] = {
    {"strip", m_strip}, {"lstrip", m_strip}, {"rstrip", m_strip}, {"split", m_split},
    {"rsplit", m_split}, {"splitlines", m_splitlines}, {"replace", m_replace},
    {"startswith", m_affix}, {"endswith", m_affix}, {"find", m_search}, {"rfind", m_search},
    {"index", m_search}, {"rindex", m_search}, {"count", m_search}, {"center", m_pad},
    {"ljust", m_pad}, {"rjust", m_pad}, {"join", m_join}, {"partition", m_partition},
    {"rpartition", m_partition}, {"removeprefix", m_partition}, {"removesuffix", m_partition},
    {"zfill", m_zfill}, {"format", m_format}, {"upper", m_no_args}, {"lower", m_no_args},
    {"casefold", m_no_args}, {"title", m_no_args}, {"capitalize", m_no_args},
    {"swapcase", m_no_args}, {"isdigit", m_no_args}, {"isdecimal", m_no_args},
    {"isnumeric", m_no_args}, {"isalpha", m_no_args}, {"isalnum", m_no_args},
    {"isspace", m_no_args}, {"islower", m_no_args}, {"isupper", m_no_args},
};

const MethodEntry* find_method(std::string_view name) {
  for (const MethodEntry& m : kMethods) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace

bool is_str_method(std::string_view name) { return find_method(name) != nullptr; }

bool is_python_str_attr(std::string_view name) {
  return is_str_method(name) ||
         std::find(kOtherAttrs.begin(), kOtherAttrs.end(), name) != kOtherAttrs.end();
}

Result<Value> call_str_method(const Value& self, std::string_view name, const CallArgs& args) {
  const MethodEntry* m = find_method(name);
  if (!m) return make_error("str." + std::string(name) + "() is not supported");
  auto r = m->fn(self.str(), name, args);
  if (!r || !self.is_markup() || !r->is_string()) return r;
  const bool keep = std::find(kKeepsMarkup.begin(), kKeepsMarkup.end(), name) != kKeepsMarkup.end();
  return keep ? Value::markup(r->str()) : r;
}

}  // namespace pagoda::model::jinja
