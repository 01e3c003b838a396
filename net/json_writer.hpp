// JsonWriter: builds one JSON text by appending (objects, arrays, keys,
// values); commas are placed automatically. Strings are escaped per RFC 8259;
// invalid UTF-8 in a string value is replaced by U+FFFD (model text deltas
// are UTF-8 safe, but client-supplied text echoed back may not be).
// Non-finite doubles are written as null. Not thread-safe; a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::net {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);  // inside an object, before its value
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(int32_t v) { return value(int64_t(v)); }
  JsonWriter& value(uint64_t v);
  JsonWriter& value(double v);
  JsonWriter& value(bool v);
  JsonWriter& null();
  // Appends already-serialized JSON as one value (trusted input only).
  JsonWriter& raw(std::string_view json);
  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void separate();  // the comma before a value or key, when one is needed
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

// `s` as a JSON string literal, quotes included.
std::string json_string(std::string_view s);

}  // namespace pagoda::net
