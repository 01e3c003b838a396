// JSON <-> jinja::Value (see json_value.hpp).
#include "model/json_value.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/jinja_strings.hpp"
#include "model/json_file.hpp"
#include "model/utf8.hpp"

namespace pagoda::model {
namespace {

using jinja::Dict;
using jinja::Kind;
using jinja::ListKind;
using jinja::Value;

Error json_error(simdjson::error_code err) {
  return make_error(std::string("invalid JSON: ") + simdjson::error_message(err));
}

Result<Value> convert(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::NULL_VALUE: return Value::none();
    case simdjson::dom::element_type::BOOL: {
      bool b = false;
      if (auto err = e.get_bool().get(b)) return json_error(err);
      return Value::boolean(b);
    }
    case simdjson::dom::element_type::INT64: {
      int64_t i = 0;
      if (auto err = e.get_int64().get(i)) return json_error(err);
      return Value::integer(i);
    }
    case simdjson::dom::element_type::UINT64: {  // beyond int64: the nearest double
      uint64_t u = 0;
      if (auto err = e.get_uint64().get(u)) return json_error(err);
      return Value::number(static_cast<double>(u));
    }
    case simdjson::dom::element_type::DOUBLE: {
      double d = 0;
      if (auto err = e.get_double().get(d)) return json_error(err);
      return Value::number(d);
    }
    case simdjson::dom::element_type::STRING: {
      std::string_view s;
      if (auto err = e.get_string().get(s)) return json_error(err);
      return Value::string(std::string(s));
    }
    case simdjson::dom::element_type::ARRAY: {
      simdjson::dom::array arr;
      if (auto err = e.get_array().get(arr)) return json_error(err);
      std::vector<Value> items;
      for (simdjson::dom::element child : arr) {
        auto v = convert(child);
        if (!v) return v;
        items.push_back(std::move(*v));
      }
      return Value::list(std::move(items));
    }
    case simdjson::dom::element_type::OBJECT: {
      simdjson::dom::object obj;
      if (auto err = e.get_object().get(obj)) return json_error(err);
      Dict d;
      for (simdjson::dom::key_value_pair kv : obj) {
        auto v = convert(kv.value);
        if (!v) return v;
        d.set(Value::string(std::string(kv.key)), std::move(*v));
      }
      return Value::dict(std::move(d));
    }
  }
  return make_error("unknown JSON element type");
}

void append_hex4(std::string& out, unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", v & 0xFFFFu);
  out += buf;
}

void quote(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : jinja::pystr::decode(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c >= 0x10000) {
        const char32_t v = c - 0x10000;
        append_hex4(out, 0xD800 | static_cast<unsigned>(v >> 10));
        append_hex4(out, 0xDC00 | static_cast<unsigned>(v & 0x3FF));
      } else {
        append_hex4(out, static_cast<unsigned>(c));
      }
    } else {
      jinja::pystr::append_utf8(out, c);
    }
  }
  out.push_back('"');
}

std::string float_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return jinja::float_repr(d);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
    key_sep_ = o.key_separator ? *o.key_separator : ": ";
  }
  Result<void> dump(const Value& v, int level);
  std::string out;

 private:
  void newline(int level) {
    if (!o_.indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }
  Result<void> key(const Value& k);
  Result<void> dump_dict(const Dict& d, int level);

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_;
};

Result<void> Dumper::key(const Value& k) {
  switch (k.kind()) {
    case Kind::kString: quote(out, k.str(), o_.ensure_ascii); return {};
    case Kind::kInt: out += "\"" + std::to_string(k.as_int()) + "\""; return {};
    case Kind::kFloat: out += "\"" + float_text(k.as_float()) + "\""; return {};
    case Kind::kBool: out += k.as_bool() ? "\"true\"" : "\"false\""; return {};
    case Kind::kNone: out += "\"null\""; return {};
    default:
      return make_error("keys must be str, int, float, bool or None, not " + jinja::type_name(k));
  }
}

Result<void> Dumper::dump_dict(const Dict& d, int level) {
  if (d.empty()) { out += "{}"; return {}; }
  std::vector<const Dict::Entry*> entries;
  for (const auto& e : d.entries()) entries.push_back(&e);
  if (o_.sort_keys) {
    std::optional<Error> err;
    std::stable_sort(entries.begin(), entries.end(), [&](const Dict::Entry* a, const Dict::Entry* b) {
      auto c = jinja::compare(a->first, b->first);
      if (!c) { if (!err) err = c.error(); return false; }
      return *c < 0;
    });
    if (err) return *err;
  }
  out.push_back('{');
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += item_sep_;
    newline(level + 1);
    if (auto r = key(entries[i]->first); !r) return r;
    out += key_sep_;
    if (auto r = dump(entries[i]->second, level + 1); !r) return r;
  }
  newline(level);
  out.push_back('}');
  return {};
}

Result<void> Dumper::dump(const Value& v, int level) {
  if (level > 1000) return make_error("JSON nesting too deep");
  switch (v.kind()) {
    case Kind::kNone: out += "null"; return {};
    case Kind::kBool: out += v.as_bool() ? "true" : "false"; return {};
    case Kind::kInt: out += std::to_string(v.as_int()); return {};
    case Kind::kFloat: out += float_text(v.as_float()); return {};
    case Kind::kString: quote(out, v.str(), o_.ensure_ascii); return {};
    case Kind::kDict: return dump_dict(v.dict(), level);
    case Kind::kList: {
      const ListKind k = v.list().kind;
      if (k != ListKind::kList && k != ListKind::kTuple) break;
      const auto& items = v.items();
      if (items.empty()) { out += "[]"; return {}; }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep_;
        newline(level + 1);
        if (auto r = dump(items[i], level + 1); !r) return r;
      }
      newline(level);
      out.push_back(']');
      return {};
    }
    default: break;
  }
  return make_error("Object of type " + jinja::type_name(v) + " is not JSON serializable");
}

}  // namespace

Result<jinja::Value> parse_json(std::string_view text) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(widen_big_integers(text));
  simdjson::dom::element root;
  const auto err = parser.parse(padded).get(root);
  if (err) return json_error(err);
  return convert(root);
}

Result<std::string> to_json(const jinja::Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  if (auto r = d.dump(v, 0); !r) return r.error();
  return std::move(d.out);
}

void append_json_string(std::string& out, std::string_view s, std::string_view replacement) {
  out.push_back('"');
  const char* const end = s.data() + s.size();
  for (const char* p = s.data(); p < end;) {
    const unsigned char c = static_cast<unsigned char>(*p);
    const char* escape = nullptr;
    switch (c) {
      case '"': escape = "\\\""; break;
      case '\\': escape = "\\\\"; break;
      case '\n': escape = "\\n"; break;
      case '\r': escape = "\\r"; break;
      case '\t': escape = "\\t"; break;
      case '\b': escape = "\\b"; break;
      case '\f': escape = "\\f"; break;
      default: break;
    }
    if (escape != nullptr || c < 0x20) {
      char buf[8];
      if (escape == nullptr) std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += escape != nullptr ? escape : buf;
      ++p;
      continue;
    }
    const utf8::Decoded d = utf8::decode(p, end);
    if (!d.valid) {
      out += replacement;  // one per invalid byte
      ++p;
      continue;
    }
    out.append(p, d.len);
    p += d.len;
  }
  out.push_back('"');
}

}  // namespace pagoda::model
