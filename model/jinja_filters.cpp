// Jinja filters on strings and numbers, and the filter dispatch (see
// jinja_filters.hpp). Sequence filters are in jinja_seq_filters.cpp.
#include "model/jinja_filters.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <vector>

#include "model/jinja_filter_table.hpp"
#include "model/jinja_methods.hpp"
#include "model/jinja_operators.hpp"
#include "model/jinja_strings.hpp"
#include "model/json_value.hpp"

namespace pagoda::model::jinja {
namespace {

Value same_markup(const Value& like, std::string s) {
  return like.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
}

// Validates Python numeric-literal underscores and removes them.
std::optional<std::string> strip_underscores(std::string_view s, bool hex) {
  auto digit = [hex](char c) {
    return hex ? std::isxdigit(static_cast<unsigned char>(c)) != 0 : std::isdigit(static_cast<unsigned char>(c)) != 0;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') { out.push_back(s[i]); continue; }
    const bool ok = i > 0 && i + 1 < s.size() && digit(s[i - 1]) && digit(s[i + 1]);
    if (!ok) return std::nullopt;
  }
  return out;
}

enum class Parse { kOk, kInvalid, kOverflow };

// Python int(text, base) for bases 0, 2, 8, 10, 16.
Parse parse_py_int(const std::string& text, int64_t base, int64_t& out) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) { neg = s[0] == '-'; s.erase(0, 1); }
  int b = static_cast<int>(base);
  if (s.size() > 1 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (b == 0 || b == pb)) {
      b = pb;
      s.erase(0, 2);
      if (!s.empty() && s[0] == '_') s.erase(0, 1);
    }
  }
  if (b == 0) {
    b = 10;
    if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string::npos) return Parse::kInvalid;
  }
  if (b != 2 && b != 8 && b != 10 && b != 16) return Parse::kInvalid;
  auto digits = strip_underscores(s, true);
  if (!digits || digits->empty()) return Parse::kInvalid;
  uint64_t v = 0;
  const auto r = std::from_chars(digits->data(), digits->data() + digits->size(), v, b);
  if (r.ec == std::errc::result_out_of_range) return Parse::kOverflow;
  if (r.ec != std::errc() || r.ptr != digits->data() + digits->size()) return Parse::kInvalid;
  if (v > static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0)) return Parse::kOverflow;
  out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return Parse::kOk;
}

// Python float(text).
std::optional<double> parse_py_float(const std::string& text) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  std::string lower = pystr::lower(s);
  double sign = 1.0;
  std::string_view body = lower;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) { sign = body[0] == '-' ? -1.0 : 1.0; body.remove_prefix(1); }
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body == "nan") return NAN;
  auto digits = strip_underscores(lower, false);
  if (!digits || digits->empty()) return std::nullopt;
  size_t i = (*digits)[0] == '+' || (*digits)[0] == '-' ? 1 : 0;
  const size_t mantissa_start = i;
  bool any_digit = false;
  while (i < digits->size() && std::isdigit(static_cast<unsigned char>((*digits)[i]))) { ++i; any_digit = true; }
  if (i < digits->size() && (*digits)[i] == '.') {
    ++i;
    while (i < digits->size() && std::isdigit(static_cast<unsigned char>((*digits)[i]))) { ++i; any_digit = true; }
  }
  if (!any_digit) return std::nullopt;
  if (i < digits->size() && (*digits)[i] == 'e') {
    ++i;
    if (i < digits->size() && ((*digits)[i] == '+' || (*digits)[i] == '-')) ++i;
    const size_t exp_start = i;
    while (i < digits->size() && std::isdigit(static_cast<unsigned char>((*digits)[i]))) ++i;
    if (i == exp_start) return std::nullopt;
  }
  if (i != digits->size()) return std::nullopt;
  double v = 0;
  const char* b = digits->data() + mantissa_start;
  const auto r = std::from_chars(b, digits->data() + digits->size(), v);
  if (r.ec == std::errc::result_out_of_range) {
    const size_t e = digits->find('e');
    const bool tiny = e != std::string::npos && (*digits)[e + 1] == '-';
    return tiny ? 0.0 * sign : sign * INFINITY;
  }
  if (r.ec != std::errc()) return std::nullopt;
  return (mantissa_start ? ((*digits)[0] == '-' ? -v : v) : v);
}

Result<Value> f_int(const Value& v, const CallArgs& a) {
  auto p = bind_args("int", a, {{"default", Value::integer(0)}, {"base", Value::integer(10)}});
  if (!p) return p.error();
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double d = v.as_float();
    if (std::isinf(d)) return make_error("cannot convert float infinity to integer");
    if (std::isnan(d)) return (*p)[0];
    if (std::fabs(d) >= 9.2e18) return make_error("integer beyond int64 is not supported");
    return Value::integer(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return (*p)[0];
  int64_t out = 0;
  const Parse r = parse_py_int(v.str(), (*p)[1].as_int(), out);
  if (r == Parse::kOk) return Value::integer(out);
  if (r == Parse::kOverflow) return make_error("integer beyond int64 is not supported");
  const auto f = parse_py_float(v.str());
  if (!f || !std::isfinite(*f)) return (*p)[0];
  if (std::fabs(*f) >= 9.2e18) return make_error("integer beyond int64 is not supported");
  return Value::integer(static_cast<int64_t>(*f));
}

Result<Value> f_float(const Value& v, const CallArgs& a) {
  auto p = bind_args("float", a, {{"default", Value::number(0.0)}});
  if (!p) return p.error();
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (!v.is_string()) return (*p)[0];
  const auto f = parse_py_float(v.str());
  return f ? Value::number(*f) : (*p)[0];
}

Result<Value> f_round(const Value& v, const CallArgs& a) {
  auto p = bind_args("round", a, {{"precision", Value::integer(0)}, {"method", Value::string("common")}});
  if (!p) return p.error();
  const std::string method = to_str((*p)[1]);
  if (method != "common" && method != "ceil" && method != "floor") {
    return make_error("method must be common, ceil or floor");
  }
  if (!v.is_number()) return make_error("type " + type_name(v) + " doesn't define __round__ method");
  const int64_t prec = (*p)[0].as_int();
  if (method != "common") {
    const double scale = std::pow(10.0, static_cast<double>(prec));
    const double x = v.as_float() * scale;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (!v.is_float()) {
    if (prec >= 0) return Value::integer(v.as_int());
    return make_error("round() of an integer to negative precision is not supported");
  }
  const double d = v.as_float();
  if (!std::isfinite(d) || prec > 323) return Value::number(d);
  if (prec < 0) return make_error("round() to negative precision is not supported");
  std::vector<char> buf(static_cast<size_t>(prec) + 400);
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), d, std::chars_format::fixed,
                               static_cast<int>(prec));
  double out = 0;
  std::from_chars(buf.data(), r.ptr, out);
  return Value::number(out);
}

Result<Value> f_tojson(const Value& v, const CallArgs& a) {
  auto p = bind_args("tojson", a, {{"ensure_ascii", Value::boolean(false)}, {"indent", Value::none()},
                                   {"separators", Value::none()}, {"sort_keys", Value::boolean(false)}});
  if (!p) return p.error();
  JsonDumpOptions o;
  o.ensure_ascii = truthy((*p)[0]);
  o.sort_keys = truthy((*p)[3]);
  const Value& indent = (*p)[1];
  if (indent.is_string()) o.indent = indent.str();
  else if (indent.is_int() || indent.is_bool()) o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  else if (!indent.is_none()) return make_error("tojson: indent must be an int or a string");
  const Value& sep = (*p)[2];
  if (!sep.is_none()) {
    if (!sep.is_list() || sep.items().size() != 2 || !sep.items()[0].is_string() || !sep.items()[1].is_string()) {
      return make_error("tojson: separators must be a pair of strings");
    }
    o.item_separator = sep.items()[0].str();
    o.key_separator = sep.items()[1].str();
  }
  auto s = to_json(v, o);
  if (!s) return s.error();
  return Value::string(std::move(*s));
}

Result<Value> f_indent(const Value& v, const CallArgs& a) {
  auto p = bind_args("indent", a, {{"width", Value::integer(4)}, {"first", Value::boolean(false)},
                                   {"blank", Value::boolean(false)}});
  if (!p) return p.error();
  std::string ind;
  if ((*p)[0].is_string()) ind = (*p)[0].str();
  else if ((*p)[0].is_int() || (*p)[0].is_bool()) ind = std::string(static_cast<size_t>(std::max<int64_t>(0, (*p)[0].as_int())), ' ');
  else return make_error("indent: width must be an int or a string");
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_string()) return make_error("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  const std::vector<std::string> lines = pystr::splitlines(v.str() + "\n", false);
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) rv += "\n";
    if (i && (truthy((*p)[2]) || !lines[i].empty())) rv += ind;
    rv += lines[i];
  }
  if (truthy((*p)[1])) rv = ind + rv;
  return same_markup(v, std::move(rv));
}

Result<Value> f_truncate(const Value& v, const CallArgs& a) {
  auto p = bind_args("truncate", a, {{"length", Value::integer(255)}, {"killwords", Value::boolean(false)},
                                     {"end", Value::string("...")}, {"leeway", Value::none()}});
  if (!p) return p.error();
  if (!v.is_string()) {  // jinja2 takes len() of the value itself
    auto n = length(v);
    if (!n) return n.error();
    const int64_t limit = (*p)[0].as_int() + ((*p)[3].is_none() ? 5 : (*p)[3].as_int());
    if (*n <= limit) return v;
    return make_error("truncate: cannot truncate a " + type_name(v));
  }
  const std::u32string s = pystr::decode(v.str());
  const std::string end = to_str((*p)[2]);
  const int64_t length = (*p)[0].as_int(), end_len = pystr::length(end);
  const int64_t leeway = (*p)[3].is_none() ? 5 : (*p)[3].as_int();
  if (length < end_len) return make_error("expected length >= " + std::to_string(end_len));
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value::string(pystr::encode(s));
  std::string head = pystr::encode(std::u32string_view(s).substr(0, static_cast<size_t>(length - end_len)));
  if (!truthy((*p)[1])) head = pystr::rsplit(head, std::string(" "), 1)[0];
  return Value::string(head + end);
}

Result<Value> f_title(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("title", a, {}); !p) return p.error();
  // jinja2 splits on runs of [-\s({\[<] and, for every piece (words and
  // separator runs alike), upper-cases its first character and lower-cases
  // the rest (Python's full mappings).
  const std::u32string cps = pystr::decode(to_str(v));
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pystr::is_space(c);
  };
  std::string out;
  for (size_t i = 0; i < cps.size();) {
    size_t j = i + 1;
    while (j < cps.size() && is_sep(cps[j]) == is_sep(cps[i])) ++j;
    const std::u32string_view piece(cps.data() + i, j - i);
    out += pystr::upper(pystr::encode(piece.substr(0, 1)));
    out += pystr::lower(pystr::encode(piece.substr(1)));
    i = j;
  }
  return Value::string(std::move(out));
}

Result<Value> f_trim(const Value& v, const CallArgs& a) {
  auto p = bind_args("trim", a, {{"chars", Value::none()}});
  if (!p) return p.error();
  std::optional<std::string> chars;
  if (!(*p)[0].is_none()) chars = to_str((*p)[0]);
  return same_markup(v, pystr::strip(to_str(v), chars, true, true));
}

Result<Value> f_replace(const Value& v, const CallArgs& a) {
  auto p = bind_args("replace", a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::none()}});
  if (!p) return p.error();
  const int64_t count = (*p)[2].is_none() ? -1 : (*p)[2].as_int();
  return Value::string(pystr::replace(to_str(v), to_str((*p)[0]), to_str((*p)[1]), count));
}

Result<Value> f_default(const Value& v, const CallArgs& a) {
  auto p = bind_args("default", a, {{"default_value", Value::string("")}, {"boolean", Value::boolean(false)}});
  if (!p) return p.error();
  if (v.is_undefined() || (truthy((*p)[1]) && !truthy(v))) return (*p)[0];
  return v;
}

template <std::string (*F)(std::string_view)>
Result<Value> case_filter(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("filter", a, {}); !p) return p.error();
  return same_markup(v, F(to_str(v)));
}

Result<Value> f_center(const Value& v, const CallArgs& a) {
  auto p = bind_args("center", a, {{"width", Value::integer(80)}});
  if (!p) return p.error();
  return same_markup(v, pystr::pad(to_str(v), (*p)[0].as_int(), " ", 0));
}

Result<Value> f_wordcount(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("wordcount", a, {}); !p) return p.error();
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : pystr::decode(to_str(v))) {
    const bool w = pystr::is_word_char(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Result<Value> f_length(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("length", a, {}); !p) return p.error();
  auto n = length(v);
  if (!n) return n.error();
  return Value::integer(*n);
}

Result<Value> f_abs(const Value& v, const CallArgs& a) {
  if (auto p = bind_args("abs", a, {}); !p) return p.error();
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) return make_error("integer overflow");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  return make_error("bad operand type for abs(): '" + type_name(v) + "'");
}

Result<Value> f_attr(const Value& v, const CallArgs& a) {
  auto p = bind_args("attr", a, {{"name", std::nullopt}});
  if (!p) return p.error();
  const std::string name = to_str((*p)[0]);
  if (v.is_dict() && !is_known_method(name)) {
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  return get_attr(v, name);
}

Result<Value> f_format(const Value& v, const CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty()) {
    return make_error("can't handle positional and keyword arguments at the same time");
  }
  if (a.kwargs.empty()) return printf_format(soft_str(v), Value::tuple(a.args));
  Dict d;
  for (const auto& [k, val] : a.kwargs) d.set(Value::string(k), val);
  return printf_format(soft_str(v), Value::dict(std::move(d)));
}

constexpr FilterEntry kText[] = {
    {"format", f_format},
    {"int", f_int}, {"float", f_float}, {"round", f_round}, {"tojson", f_tojson},
    {"indent", f_indent}, {"truncate", f_truncate}, {"title", f_title}, {"trim", f_trim},
    {"replace", f_replace}, {"default", f_default}, {"d", f_default},
    {"upper", case_filter<pystr::upper>}, {"lower", case_filter<pystr::lower>},
    {"capitalize", case_filter<pystr::capitalize>}, {"center", f_center},
    {"wordcount", f_wordcount}, {"length", f_length}, {"count", f_length}, {"abs", f_abs},
    {"attr", f_attr},
    {"string", [](const Value& v, const CallArgs& a) -> Result<Value> {
       if (auto p = bind_args("string", a, {}); !p) return p.error();
       return soft_str(v);
     }},
    {"safe", [](const Value& v, const CallArgs& a) -> Result<Value> {
       if (auto p = bind_args("safe", a, {}); !p) return p.error();
       return Value::markup(to_str(v));
     }},
    {"escape", [](const Value& v, const CallArgs& a) -> Result<Value> {
       if (auto p = bind_args("escape", a, {}); !p) return p.error();
       return v.is_markup() ? v : Value::markup(pystr::html_escape(to_str(v)));
     }},
    {"e", [](const Value& v, const CallArgs& a) -> Result<Value> {
       if (auto p = bind_args("e", a, {}); !p) return p.error();
       return v.is_markup() ? v : Value::markup(pystr::html_escape(to_str(v)));
     }},
};

}  // namespace

std::span<const FilterEntry> text_filters() { return kText; }

Value soft_str(const Value& v) {
  if (v.is_string()) return v;
  return Value::string(to_str(v));
}

bool is_known_filter(std::string_view name) {
  for (const auto& table : {text_filters(), sequence_filters()}) {
    for (const FilterEntry& f : table) {
      if (f.name == name) return true;
    }
  }
  return false;
}

Result<Value> apply_filter(std::string_view name, const Value& subject, const CallArgs& args) {
  for (const auto& table : {text_filters(), sequence_filters()}) {
    for (const FilterEntry& f : table) {
      if (f.name == name) return f.fn(subject, args);
    }
  }
  return make_error("No filter named '" + std::string(name) + "'.");
}

}  // namespace pagoda::model::jinja
