// Python printf-style string formatting (`'%s: %d' % (a, b)` and the
// |format filter), see jinja_operators.hpp.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>

#include "model/jinja_methods.hpp"
#include "model/jinja_operators.hpp"
#include "model/jinja_strings.hpp"

namespace pagoda::model::jinja {
namespace {

struct Spec {
  std::string flags;
  int64_t width = -1, precision = -1;
  char conv = 0;
};

// Python treats any non-tuple, non-str object with __getitem__ as a mapping.
bool mapping_like(const Value& v) {
  if (v.is_dict() || v.is_undefined()) return true;
  return v.is_list() && (v.list().kind == ListKind::kList || v.list().kind == ListKind::kRange);
}

std::string pad(std::string s, const Spec& sp, bool numeric) {
  const int64_t len = pystr::length(s);
  if (sp.width <= len) return s;
  const auto fill = static_cast<size_t>(sp.width - len);
  if (sp.flags.find('-') != std::string::npos) return s + std::string(fill, ' ');
  if (numeric && sp.flags.find('0') != std::string::npos) {
    const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ') ? 1 : 0;
    const size_t prefix = s.compare(sign, 2, "0x") == 0 || s.compare(sign, 2, "0X") == 0 ||
                                  s.compare(sign, 2, "0o") == 0 ? sign + 2 : sign;
    return s.substr(0, prefix) + std::string(fill, '0') + s.substr(prefix);
  }
  return std::string(fill, ' ') + s;
}

Result<std::string> format_int(const Value& v, const Spec& sp) {
  int64_t i = 0;
  if (v.is_int() || v.is_bool()) {
    i = v.as_int();
  } else if (v.is_float() && sp.conv != 'x' && sp.conv != 'X' && sp.conv != 'o') {
    if (!std::isfinite(v.as_float())) return make_error("cannot convert float to integer");
    i = static_cast<int64_t>(v.as_float());
  } else {
    return make_error(std::string("%") + sp.conv + " format: a real number is required, not " + type_name(v));
  }
  const bool neg = i < 0;
  const uint64_t mag = neg ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
  char buf[80];
  const char* fmt = sp.conv == 'x' ? "%llx" : sp.conv == 'X' ? "%llX" : sp.conv == 'o' ? "%llo" : "%llu";
  std::snprintf(buf, sizeof buf, fmt, static_cast<unsigned long long>(mag));
  std::string digits = buf;
  if (sp.precision > static_cast<int64_t>(digits.size())) {
    digits = std::string(static_cast<size_t>(sp.precision) - digits.size(), '0') + digits;
  }
  if (sp.flags.find('#') != std::string::npos && sp.conv != 'd' && sp.conv != 'i' && sp.conv != 'u') {
    digits = std::string("0") + (sp.conv == 'o' ? 'o' : sp.conv) + digits;
  }
  const char* sign = neg ? "-" : sp.flags.find('+') != std::string::npos ? "+"
                                 : sp.flags.find(' ') != std::string::npos ? " " : "";
  return pad(sign + digits, sp, true);
}

Result<std::string> format_float(const Value& v, const Spec& sp) {
  if (!v.is_number()) {
    return make_error(std::string("must be real number, not ") + type_name(v));
  }
  std::string f = "%";
  for (char c : sp.flags) {
    if (c != '-' && c != '0') f.push_back(c);
  }
  f += "." + std::to_string(sp.precision < 0 ? 6 : sp.precision) + sp.conv;
  char buf[512];
  std::snprintf(buf, sizeof buf, f.c_str(), v.as_float());
  return pad(buf, sp, std::isfinite(v.as_float()));
}

// ascii(): repr with non-ASCII code points escaped.
std::string ascii_repr(const Value& v) {
  std::string out;
  char buf[16];
  for (char32_t c : pystr::decode(repr(v))) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x",
                  static_cast<unsigned>(c));
    out += buf;
  }
  return out;
}

Result<std::string> convert(const Value& v, const Spec& sp, bool markup) {
  switch (sp.conv) {
    case 's': case 'r': case 'a': {
      std::string s = sp.conv == 's' ? to_str(v) : sp.conv == 'r' ? repr(v) : ascii_repr(v);
      if (markup && !(sp.conv == 's' && v.is_markup())) s = pystr::html_escape(s);
      if (sp.precision >= 0) s = pystr::encode(pystr::decode(s).substr(0, static_cast<size_t>(sp.precision)));
      return pad(s, sp, false);
    }
    case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': return format_int(v, sp);
    case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': return format_float(v, sp);
    case 'c': {
      std::string s;
      if (v.is_string() && pystr::length(v.str()) == 1) s = v.str();
      else if (v.is_int() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) pystr::append_utf8(s, static_cast<char32_t>(v.as_int()));
      else return make_error("%c requires an int or a unicode character");
      return pad(s, sp, false);
    }
    default: return make_error(std::string("unsupported format character '") + sp.conv + "'");
  }
}

// One `fmt % args` evaluation.
class Formatter {
 public:
  Formatter(const Value& fmt, const Value& args)
      : fmt_(fmt.str()), markup_(fmt.is_markup()), args_(args),
        tuple_(args.is_list() && args.list().kind == ListKind::kTuple),
        mapping_(!tuple_ && !args.is_string() && mapping_like(args)) {
    if (tuple_) pos_ = args.items();
    else pos_.push_back(args);
  }

  Result<Value> run() {
    std::string out;
    for (size_t i = 0; i < fmt_.size(); ++i) {
      if (fmt_[i] != '%') { out.push_back(fmt_[i]); continue; }
      if (++i >= fmt_.size()) return make_error("incomplete format");
      if (fmt_[i] == '%') { out.push_back('%'); continue; }
      auto piece = conversion(i);
      if (!piece) return piece.error();
      out += *piece;
    }
    if (!mapping_ && next_ < pos_.size() && (tuple_ || !used_)) {
      return make_error("not all arguments converted during string formatting");
    }
    return markup_ ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }

 private:
  Result<Value> next_arg() {
    if (next_ >= pos_.size()) return make_error("not enough arguments for format string");
    used_ = true;
    return pos_[next_++];
  }

  // Width or precision: digits, or `*` taking the next argument.
  Result<void> number(size_t& i, int64_t& into) {
    if (i < fmt_.size() && fmt_[i] == '*') {
      ++i;
      auto w = next_arg();
      if (!w) return w.error();
      if (!w->is_int()) return make_error("* wants int");
      into = w->as_int();
    } else if (i < fmt_.size() && std::isdigit(static_cast<unsigned char>(fmt_[i]))) {
      into = 0;
      while (i < fmt_.size() && std::isdigit(static_cast<unsigned char>(fmt_[i]))) into = into * 10 + (fmt_[i++] - '0');
    }
    return {};
  }

  // Parses one conversion starting after '%' at i (left on its last char).
  Result<std::string> conversion(size_t& i) {
    Spec sp;
    std::optional<Value> keyed;
    if (fmt_[i] == '(') {
      const size_t close = fmt_.find(')', i);
      if (close == std::string::npos) return make_error("incomplete format key");
      if (!mapping_) return make_error("format requires a mapping");
      const std::string key = fmt_.substr(i + 1, close - i - 1);
      auto v = get_item(args_, Value::string(key));
      if (!v) return v.error();
      if (v->is_undefined() && args_.is_dict()) return make_error("KeyError: '" + key + "'");
      keyed = *v;
      i = close + 1;
    }
    while (i < fmt_.size() && std::string_view("-+ #0").find(fmt_[i]) != std::string_view::npos) sp.flags.push_back(fmt_[i++]);
    if (auto r = number(i, sp.width); !r) return r.error();
    if (i < fmt_.size() && fmt_[i] == '.') {
      ++i;
      sp.precision = 0;
      if (auto r = number(i, sp.precision); !r) return r.error();
    }
    while (i < fmt_.size() && (fmt_[i] == 'h' || fmt_[i] == 'l' || fmt_[i] == 'L')) ++i;
    if (i >= fmt_.size()) return make_error("incomplete format");
    sp.conv = fmt_[i];
    Value arg;
    if (keyed) {
      arg = *keyed;
    } else {
      auto a = next_arg();
      if (!a) return a.error();
      arg = *a;
    }
    if (arg.is_undefined() && sp.conv != 's' && sp.conv != 'r' && sp.conv != 'a') return undefined_error(arg);
    return convert(arg, sp, markup_);
  }

  const std::string& fmt_;
  const bool markup_;
  const Value& args_;
  const bool tuple_, mapping_;
  std::vector<Value> pos_;
  size_t next_ = 0;
  bool used_ = false;
};

}  // namespace

Result<Value> printf_format(const Value& fmt, const Value& args) { return Formatter(fmt, args).run(); }

}  // namespace pagoda::model::jinja
