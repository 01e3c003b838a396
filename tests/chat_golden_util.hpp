// Helpers shared by the Jinja and chat-template golden tests: reading golden
// files, looking up JSON fields, and a readable first-difference report.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "model/jinja_value.hpp"
#include "model/json_value.hpp"

namespace pagoda::model::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// obj[key], or an undefined Value when absent. Requires obj to be a dict.
inline const jinja::Value& field(const jinja::Value& obj, std::string_view key) {
  static const jinja::Value kMissing;
  const jinja::Value* v = obj.dict().find(key);
  return v ? *v : kMissing;
}

// Where two strings first differ, with both shown as Python reprs.
inline std::string diff(const std::string& want, const std::string& got) {
  auto show = [](const std::string& s) { return jinja::repr(jinja::Value::string(s)); };
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  return "\n  expected: " + show(want) + "\n  actual:   " + show(got) +
         "\n  first difference at byte " + std::to_string(i) + ": expected " +
         show(want.substr(i, 30)) + ", got " + show(got.substr(i, 30));
}

}  // namespace pagoda::model::test
