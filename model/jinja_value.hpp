// jinja::Value: the dynamic value of the Jinja interpreter, modelled on the
// Python objects jinja2 manipulates when transformers renders a chat template.
//
// Kinds: undefined (jinja2's Undefined, carrying the message an illegal use
// raises), none, bool, int (int64: overflow is an error, never a wrap),
// float, string (UTF-8; a `markup` bit mimics markupsafe.Markup from |safe),
// list (also tuple, dict views and range, which differ only in repr and
// subscription), dict (insertion-ordered like a Python dict, any hashable key),
// object (namespace() and the loop variable: named attributes), callable
// (globals, bound methods, macros) and iterator (the one-shot generators that
// select/map/... return in jinja2).
//
// Ownership: a Value is a small handle. Strings, lists and dicts are immutable
// and shared (copying a Value is a refcount bump); objects and iterators are
// shared mutable state (a namespace assignment is visible through every copy,
// as in Python). Values built for one render must not be shared between
// threads while that render runs; immutable inputs (messages parsed from JSON)
// may be shared freely.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gpu/result.hpp"

namespace pagoda::model::jinja {

class Value;
class Dict;
struct ListData;
struct Object;
struct Callable;
struct IterState;

enum class Kind : uint8_t {
  kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject, kCallable, kIterator
};
enum class ListKind : uint8_t { kList, kTuple, kDictKeys, kDictValues, kDictItems, kRange };

class Value {
 public:
  Value();  // undefined
  static Value undefined(std::string message, bool security = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value markup(std::string s);
  static Value list(std::vector<Value> items, ListKind kind = ListKind::kList);
  static Value tuple(std::vector<Value> items);
  static Value range(int64_t start, int64_t stop, int64_t step);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> o);
  static Value callable(std::shared_ptr<const Callable> c);
  static Value iterator(std::shared_ptr<IterState> it);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_callable() const { return kind() == Kind::kCallable; }
  bool is_iterator() const { return kind() == Kind::kIterator; }

  // Accessors: calling one for another kind is a bug (asserts).
  const std::string& undefined_message() const;
  bool undefined_is_security() const;
  bool as_bool() const;
  int64_t as_int() const;      // bool or int
  double as_float() const;     // bool, int or float
  const std::string& str() const;
  bool is_markup() const;
  const ListData& list() const;
  const std::vector<Value>& items() const;  // list()'s elements
  const Dict& dict() const;
  Object& object() const;
  const Callable& callable() const;
  IterState& iter() const;
  // Identity of shared state (for `is sameas`, equality of objects).
  const void* identity() const;

 private:
  struct Undef { std::shared_ptr<const std::string> message; bool security = false; };
  struct None {};
  struct Str { std::shared_ptr<const std::string> s; bool markup = false; };
  std::variant<Undef, None, bool, int64_t, double, Str, std::shared_ptr<const ListData>,
               std::shared_ptr<const Dict>, std::shared_ptr<Object>,
               std::shared_ptr<const Callable>, std::shared_ptr<IterState>> v_;
};

// Insertion-ordered mapping with Python key semantics (1 == 1.0 == True).
class Dict {
 public:
  using Entry = std::pair<Value, Value>;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces in place or appends
  bool erase(const Value& key);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }
 private:
  std::vector<Entry> entries_;
};

struct ListData {
  std::vector<Value> items;
  ListKind kind = ListKind::kList;
  int64_t start = 0, stop = 0, step = 1;  // kRange only, for repr
};

// namespace() objects and loop contexts: a type name and attributes.
struct Object {
  std::string type_name;  // "Namespace", "LoopContext"
  Dict attrs;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

struct Callable {
  std::string name;
  std::function<Result<Value>(const CallArgs&)> fn;
};

// One-shot iterator (a Python generator). Items are computed eagerly; an
// error met while computing them is deferred until the iterator is consumed
// past the items produced before it, as a lazy generator would raise it.
struct IterState {
  std::string type_name = "generator";
  std::vector<Value> items;
  size_t pos = 0;
  std::optional<Error> error;
  // Takes every remaining item (or the deferred error).
  Result<std::vector<Value>> drain();
};

// Python semantics.
bool truthy(const Value& v);
std::string to_str(const Value& v);    // str(v); undefined -> ""
std::string repr(const Value& v);      // repr(v)
std::string float_repr(double d);      // repr(float)
std::string type_name(const Value& v); // Python type name: 'str', 'dict', ...
bool equals(const Value& a, const Value& b);
// Ordering for <, <=, >, >= and sorting: -1/0/1, or a TypeError.
Result<int> compare(const Value& a, const Value& b);
// iter(v): list items, string code points, dict keys, nothing for undefined;
// drains iterators; an Error for non-iterables.
Result<std::vector<Value>> iterate(const Value& v);
Result<int64_t> length(const Value& v);  // len(v)
bool is_hashable(const Value& v);
// Error for illegal use of an undefined value (its carried message).
Error undefined_error(const Value& v);

// Binds call arguments to a Python-like signature: `names` in order, each
// with an optional default (nullopt = required). Positional args fill names
// in order; keywords by name. Errors name `fn` and the offending argument.
struct Param {
  const char* name;
  std::optional<Value> def;
};
Result<std::vector<Value>> bind_args(std::string_view fn, const CallArgs& a,
                                     std::initializer_list<Param> params);

}  // namespace pagoda::model::jinja
