// A small reader for the Prometheus text exposition format, written for the
// tests (independent of net/metrics_text.cpp): it records every sample's
// value and reports what is wrong:
//  - a sample whose family (name, or name less _bucket/_sum/_count for a
//    histogram) has no # TYPE line before it, or no # HELP line;
//  - a value that is not a number (+Inf, -Inf, NaN allowed);
//  - per histogram series: le bounds not increasing, bucket counts
//    decreasing, no +Inf bucket, a missing _sum / _count, or the +Inf bucket
//    different from _count.
#pragma once

#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace pagoda::test {

struct MetricsCheck {
  std::string errors;                     // empty: well formed
  std::map<std::string, std::string> types;  // family -> gauge / counter / histogram
  std::map<std::string, double> values;   // "name{labels}" (or "name") -> value
};

namespace metrics_detail {

inline bool parse_value(const std::string& s, double& out) {
  if (s == "+Inf") { out = std::numeric_limits<double>::infinity(); return true; }
  if (s == "-Inf") { out = -std::numeric_limits<double>::infinity(); return true; }
  if (s == "NaN") { out = std::numeric_limits<double>::quiet_NaN(); return true; }
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// "a=\"x\",le=\"1\"" -> {{a, x}, {le, 1}}; false when malformed.
inline bool parse_labels(const std::string& s, std::vector<std::pair<std::string, std::string>>& out) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t eq = s.find('=', i);
    if (eq == std::string::npos || eq + 1 >= s.size() || s[eq + 1] != '"') return false;
    std::string value;
    size_t j = eq + 2;
    for (; j < s.size() && s[j] != '"'; ++j) {
      if (s[j] == '\\' && j + 1 < s.size()) ++j;
      value += s[j];
    }
    if (j >= s.size()) return false;
    out.emplace_back(s.substr(i, eq - i), value);
    i = j + 1;
    if (i < s.size() && s[i] == ',') ++i;
  }
  return true;
}

struct Series {
  std::vector<std::pair<double, double>> buckets;  // (le, count) in order
  bool has_sum = false, has_count = false;
  double count = 0.0;
};

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace metrics_detail

inline MetricsCheck check_metrics(const std::string& text) {
  using namespace metrics_detail;
  MetricsCheck out;
  std::set<std::string> helped;
  std::map<std::string, Series> series;  // histogram family + labels without le
  std::istringstream in(text);
  std::string line;
  auto error = [&](const std::string& what) { out.errors += what + " in line: " + line + "\n"; };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0) {
      helped.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      if (type != "gauge" && type != "counter" && type != "histogram") error("unknown type");
      out.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) { error("no value"); continue; }
    std::string name, labels;
    if (brace != std::string::npos && brace < space) {
      const size_t close = line.rfind('}', space);
      if (close == std::string::npos || close < brace) { error("unclosed labels"); continue; }
      name = line.substr(0, brace);
      labels = line.substr(brace + 1, close - brace - 1);
    } else {
      name = line.substr(0, space);
    }
    double value = 0.0;
    if (!parse_value(line.substr(space + 1), value)) { error("bad value"); continue; }
    std::vector<std::pair<std::string, std::string>> pairs;
    if (!parse_labels(labels, pairs)) { error("bad labels"); continue; }
    out.values[labels.empty() ? name : name + "{" + labels + "}"] = value;

    std::string family = name;
    std::string part;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string base = name.substr(0, name.size() - std::string(suffix).size());
      if (ends_with(name, suffix) && out.types.count(base) && out.types[base] == "histogram") {
        family = base;
        part = suffix;
      }
    }
    if (!out.types.count(family)) { error("no # TYPE for " + family); continue; }
    if (!helped.count(family)) error("no # HELP for " + family);
    if (out.types[family] != "histogram") continue;
    if (part.empty()) { error("histogram sample without _bucket/_sum/_count"); continue; }
    std::string key = family + "{";
    double le = 0.0;
    bool has_le = false;
    for (const auto& [k, v] : pairs) {
      if (k == "le") {
        has_le = parse_value(v, le);
      } else {
        key += k + "=" + v + ",";
      }
    }
    Series& s = series[key];
    if (part == "_bucket") {
      if (!has_le) { error("bucket without le"); continue; }
      if (!s.buckets.empty() && !(le > s.buckets.back().first)) error("le not increasing");
      if (!s.buckets.empty() && value < s.buckets.back().second) error("bucket count decreasing");
      s.buckets.emplace_back(le, value);
    } else if (part == "_sum") {
      s.has_sum = true;
    } else {
      s.has_count = true;
      s.count = value;
    }
  }
  for (const auto& [key, s] : series) {
    if (s.buckets.empty() || s.buckets.back().first != std::numeric_limits<double>::infinity()) {
      out.errors += key + ": no +Inf bucket\n";
    }
    if (!s.has_sum || !s.has_count) out.errors += key + ": no _sum or _count\n";
    if (!s.buckets.empty() && s.has_count && s.buckets.back().second != s.count) {
      out.errors += key + ": +Inf bucket != _count\n";
    }
  }
  return out;
}

}  // namespace pagoda::test
