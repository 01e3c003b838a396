// JsonFields: typed access to the fields of one config.json object for the
// HF config readers (hf_config.cpp, gemma_config.cpp); errors name the file
// and the key, and a null field counts as absent. Internal to model/.
// Thread-safety: a view of a parsed document; use on one thread.
#pragma once

#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/result.hpp"
#include "model/config_limits.hpp"

namespace pagoda::model {

inline const char* json_type_name(simdjson::dom::element el) {
  switch (el.type()) {
    case simdjson::dom::element_type::ARRAY:
      return "array";
    case simdjson::dom::element_type::OBJECT:
      return "object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
      return "integer";
    case simdjson::dom::element_type::DOUBLE:
      return "number";
    case simdjson::dom::element_type::STRING:
      return "string";
    case simdjson::dom::element_type::BOOL:
      return "bool";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
  }
  return "?";
}

// Typed access to the fields of one JSON object; errors name the file and key.
// A null field counts as absent (HF writes e.g. "head_dim": null).
class JsonFields {
 public:
  JsonFields(simdjson::dom::object obj, const std::string& path) : obj_(obj), path_(path) {}

  bool lookup(std::string_view key, simdjson::dom::element& el) const {
    return obj_.at_key(key).get(el) == simdjson::SUCCESS && !el.is_null();
  }
  Error missing(std::string_view key) const {
    return make_error(path_ + ": \"" + std::string(key) + "\" is missing");
  }
  Error wrong_type(std::string_view key, const char* expected, simdjson::dom::element el) const {
    return make_error(path_ + ": \"" + std::string(key) + "\" must be " + expected + " (got " +
                      json_type_name(el) + ")");
  }
  Result<int32_t> int32_or(std::string_view key, int32_t fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    int64_t v = 0;
    if (el.get(v) != simdjson::SUCCESS) return wrong_type(key, "an integer", el);
    if (v < std::numeric_limits<int32_t>::min() || v > kInt32Max) {
      return make_error(path_ + ": \"" + std::string(key) + "\" value " + std::to_string(v) +
                        " is out of range");
    }
    return static_cast<int32_t>(v);
  }
  // A non-negative count that may be huge: an integer, or an integral float
  // (integers beyond 64 bits read as floats); values above INT64_MAX saturate.
  Result<int64_t> int64_or(std::string_view key, int64_t fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    if (el.get(i) == simdjson::SUCCESS && i >= 0) return i;
    if (el.get(u) == simdjson::SUCCESS) return int64_t(std::numeric_limits<int64_t>::max());
    if (el.get(d) == simdjson::SUCCESS && d >= 0 && std::floor(d) == d) {
      return d >= 9.2e18 ? std::numeric_limits<int64_t>::max() : int64_t(d);
    }
    return wrong_type(key, "a non-negative integer", el);
  }
  Result<int32_t> int32(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return missing(key);
    return int32_or(key, 0);
  }
  Result<double> number_or(std::string_view key, double fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    double v = 0;
    if (!el.is_number() || el.get(v) != simdjson::SUCCESS) return wrong_type(key, "a number", el);
    return v;
  }
  Result<double> number(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return missing(key);
    return number_or(key, 0.0);
  }
  Result<bool> boolean_or(std::string_view key, bool fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    bool v = false;
    if (el.get(v) != simdjson::SUCCESS) return wrong_type(key, "a bool", el);
    return v;
  }
  Result<std::string> string(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return missing(key);
    std::string_view v;
    if (el.get(v) != simdjson::SUCCESS) return wrong_type(key, "a string", el);
    return std::string(v);
  }
  // An integer or an array of integers (eos_token_id); absent gives {}.
  Result<std::vector<int32_t>> int32_list(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return std::vector<int32_t>{};
    simdjson::dom::array arr;
    if (el.get(arr) != simdjson::SUCCESS) {
      auto one = int32_or(key, 0);
      if (!one) return one.error();
      return std::vector<int32_t>{*one};
    }
    std::vector<int32_t> out;
    for (simdjson::dom::element e : arr) {
      int64_t v = 0;
      if (e.get(v) != simdjson::SUCCESS || v < 0 || v > kInt32Max) {
        return wrong_type(key, "an integer or a list of non-negative integers", e);
      }
      out.push_back(static_cast<int32_t>(v));
    }
    return out;
  }
  // An array of numbers (longrope's factor lists).
  Result<std::vector<double>> number_list(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return missing(key);
    simdjson::dom::array arr;
    if (el.get(arr) != simdjson::SUCCESS) return wrong_type(key, "a list of numbers", el);
    std::vector<double> out;
    for (simdjson::dom::element e : arr) {
      double v = 0;
      if (!e.is_number() || e.get(v) != simdjson::SUCCESS) return wrong_type(key, "a list of numbers", e);
      out.push_back(v);
    }
    return out;
  }
  const std::string& path() const { return path_; }

 private:
  simdjson::dom::object obj_;
  const std::string& path_;
};

struct Architecture;

// Gemma's config.json fields (gemma_config.cpp; model_config.hpp's Gemma
// notes) into c, whose sizes and rope are already read; nothing for other
// families. obj: the config object itself (null soft-caps mean off).
Result<void> read_hf_gemma(const JsonFields& f, simdjson::dom::object obj, const Architecture& arch,
                           ModelConfig& c);

// config.json's "layer_types" (sliding_attention / full_attention per layer)
// into c.sliding_layers; false when the field is absent
// (sliding_window_config.cpp).
Result<bool> read_hf_layer_types(const JsonFields& f, ModelConfig& c);

// The sliding window of the non-Gemma families as transformers applies it
// (sliding_window_config.cpp says which field means what per family); c's
// sizes already read. Nothing for Gemma (read_hf_gemma) and Llama.
Result<void> read_hf_window(const JsonFields& f, simdjson::dom::object obj, const Architecture& arch,
                            ModelConfig& c);

}  // namespace pagoda::model
