// Sampling fields from JSON (net/sampling_json.hpp).
//
// Number rules (what pydantic's lax mode, hence vLLM, accepts): an integer
// field takes a JSON integer or a float with an integral value (2.0); a float
// field takes any JSON number. Booleans are never numbers. Out-of-range
// integers (beyond int32) are errors naming the field.
#include "net/sampling_json.hpp"

#include "net/constraint_json.hpp"

#include <cmath>
#include <limits>
#include <string>

namespace pagoda::net {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

Error type_error(std::string_view key, const char* what) {
  return make_error(std::string(key) + " must be " + what);
}

bool is_number(element v) {
  const element_type t = v.type();
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

Result<double> read_double(std::string_view key, element v) {
  if (!is_number(v)) return type_error(key, "a number");
  double d = 0.0;
  if (v.get_double().get(d) != simdjson::SUCCESS || !std::isfinite(d)) return type_error(key, "a number");
  return d;
}

Result<float> read_float(std::string_view key, element v) {
  auto d = read_double(key, v);
  if (!d) return d.error();
  if (std::fabs(*d) > double(std::numeric_limits<float>::max())) return type_error(key, "a finite number");
  return float(*d);
}

// An integer in [lo, hi]; integral floats are accepted.
Result<int64_t> read_integer(std::string_view key, element v, int64_t lo, int64_t hi) {
  if (!is_number(v)) return type_error(key, "an integer");
  const std::string range = " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  int64_t i = 0;
  if (v.type() == element_type::INT64) {
    i = v.get_int64().value_unsafe();
  } else if (v.type() == element_type::UINT64) {
    return make_error(std::string(key) + range);
  } else {
    const double d = v.get_double().value_unsafe();
    if (d != std::floor(d)) return type_error(key, "an integer");
    if (d < double(lo) || d > double(hi)) return make_error(std::string(key) + range);
    i = int64_t(d);
  }
  if (i < lo || i > hi) return make_error(std::string(key) + range);
  return i;
}

Result<int32_t> read_int32(std::string_view key, element v) {
  auto i = read_integer(key, v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  if (!i) return i.error();
  return int32_t(*i);
}

Result<bool> read_bool(std::string_view key, element v) {
  bool b = false;
  if (v.get_bool().get(b) != simdjson::SUCCESS) return type_error(key, "a boolean");
  return b;
}

// A seed: any JSON integer; negative ones are taken modulo 2^64.
Result<uint64_t> read_seed(std::string_view key, element v) {
  if (v.type() == element_type::UINT64) return v.get_uint64().value_unsafe();
  auto i = read_integer(key, v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (!i) return i.error();
  return uint64_t(*i);
}

Result<std::vector<std::string>> read_stop(std::string_view key, element v) {
  std::vector<std::string> out;
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) {
    out.emplace_back(s);
    return out;
  }
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return type_error(key, "a string or an array of strings");
  if (arr.size() > kMaxStopStrings) {
    return make_error(std::string(key) + " may hold at most " + std::to_string(kMaxStopStrings) + " strings");
  }
  for (element item : arr) {
    if (item.get_string().get(s) != simdjson::SUCCESS) return type_error(key, "a string or an array of strings");
    out.emplace_back(s);
  }
  return out;
}

Result<std::vector<std::string>> read_stop_capped(std::string_view key, element v) {
  auto out = read_stop(key, v);
  if (!out) return out;
  for (const std::string& s : *out) {
    if (s.size() > kMaxStopBytes) {
      return make_error(std::string(key) + " strings may be at most " + std::to_string(kMaxStopBytes) + " bytes");
    }
  }
  return out;
}

Result<std::vector<int32_t>> read_id_list(std::string_view key, element v) {
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return type_error(key, "an array of integers");
  if (arr.size() > kMaxStopTokenIds) {
    return make_error(std::string(key) + " may hold at most " + std::to_string(kMaxStopTokenIds) + " ids");
  }
  std::vector<int32_t> out;
  for (element item : arr) {
    auto i = read_integer(key, item, 0, std::numeric_limits<int32_t>::max());
    if (!i) return type_error(key, "an array of non-negative integers");
    out.push_back(int32_t(*i));
  }
  return out;
}

// "speculative": "off" | "ngram" | "draft" | {"method": "ngram" | "draft" | "off",
// "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"}.
Result<actors::SpeculativeOptions> read_speculative(element v) {
  actors::SpeculativeOptions out;
  out.set = true;
  out.config = {.min_n = 0, .max_n = 0, .k = 0};  // not given: the server's values
  std::string_view method;
  simdjson::dom::object obj;
  if (v.get_string().get(method) != simdjson::SUCCESS) {
    if (v.get_object().get(obj) != simdjson::SUCCESS) return type_error("speculative", "a string or an object");
    method = "ngram";
    for (auto field : obj) {
      const std::string_view k = field.key;
      int32_t* slot = k == "num_speculative_tokens" ? &out.config.k
                      : k == "prompt_lookup_min"    ? &out.config.min_n
                      : k == "prompt_lookup_max"    ? &out.config.max_n
                                                    : nullptr;
      if (k == "method") {
        if (field.value.get_string().get(method) != simdjson::SUCCESS) return type_error("speculative.method", "a string");
      } else if (slot != nullptr) {
        auto i = read_int32(k, field.value);
        if (!i) return i.error();
        if (*i < 1) return make_error("speculative." + std::string(k) + " must be >= 1");
        *slot = *i;
      } else {
        return make_error("speculative: unknown field " + std::string(k));
      }
    }
  }
  if (method != "ngram" && method != "draft" && method != "off") {
    return make_error("speculative.method must be \"ngram\", \"draft\" (the server's draft model) or \"off\"");
  }
  out.ngram = method == "ngram";
  out.draft = method == "draft";
  return out;
}

// Stores a read value into `slot` or passes its error on.
template <class T, class U>
Result<bool> store(Result<T> r, U& slot) {
  if (!r) return r.error();
  slot = std::move(*r);
  return true;
}

Result<bool> apply_number_field(std::string_view key, element value, actors::SamplingOptions& o) {
  if (key == "temperature") return store(read_float(key, value), o.temperature);
  if (key == "top_p") return store(read_float(key, value), o.top_p);
  if (key == "min_p") return store(read_float(key, value), o.min_p);
  if (key == "repetition_penalty") return store(read_float(key, value), o.repetition_penalty);
  if (key == "presence_penalty") return store(read_float(key, value), o.presence_penalty);
  if (key == "frequency_penalty") return store(read_float(key, value), o.frequency_penalty);
  if (key == "length_penalty") return store(read_float(key, value), o.length_penalty);
  if (key == "max_tokens") return store(read_int32(key, value), o.max_tokens);
  if (key == "min_tokens") return store(read_int32(key, value), o.min_tokens);
  if (key == "n") return store(read_int32(key, value), o.n);
  if (key == "beam_width") return store(read_int32(key, value), o.beam_width);
  if (key == "priority") return store(read_int32(key, value), o.priority);
  if (key == "top_k") {
    auto k = read_int32(key, value);
    if (!k) return k.error();
    if (*k < -1) return make_error("top_k must be -1, 0 (disabled) or a positive integer");
    o.top_k = *k < 0 ? 0 : *k;
    return true;
  }
  return false;
}

}  // namespace

Result<bool> apply_sampling_field(std::string_view key, element value, actors::SamplingOptions& options,
                                  bool& use_beam_search) {
  static constexpr std::string_view kNames[] = {
      "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
      "frequency_penalty", "seed", "stop", "stop_token_ids", "max_tokens", "min_tokens",
      "ignore_eos", "n", "beam_width", "use_beam_search", "length_penalty", "early_stopping",
      "priority", "user", "speculative"};
  bool known = false;
  for (std::string_view name : kNames) known = known || name == key;
  if (!known) return apply_constraint_field(key, value, options);  // issue 23's fields
  if (value.is_null()) return true;

  auto number = apply_number_field(key, value, options);
  if (!number || *number) return number;
  if (key == "seed") {
    auto s = read_seed(key, value);
    if (!s) return s.error();
    options.seed = *s;
    return true;
  }
  if (key == "stop") return store(read_stop_capped(key, value), options.stop);
  if (key == "stop_token_ids") return store(read_id_list(key, value), options.stop_token_ids);
  if (key == "ignore_eos") return store(read_bool(key, value), options.ignore_eos);
  if (key == "early_stopping") return store(read_bool(key, value), options.early_stopping);
  if (key == "user") {
    std::string_view user;
    if (value.get_string().get(user) != simdjson::SUCCESS) return type_error(key, "a string");
    if (user.size() > kMaxUserBytes) {
      return make_error("user may be at most " + std::to_string(kMaxUserBytes) + " bytes");
    }
    options.client = user.empty() ? std::string() : "user:" + std::string(user);
    return true;
  }
  if (key == "speculative") return store(read_speculative(value), options.speculative);
  return store(read_bool(key, value), use_beam_search);  // use_beam_search
}

Result<void> finish_sampling(actors::SamplingOptions& options, bool use_beam_search) {
  if (options.n < 1 || options.n > kMaxN) return make_error("n must be in [1, " + std::to_string(kMaxN) + "]");
  if (use_beam_search && options.beam_width == 0) options.beam_width = std::max<int32_t>(options.n, 2);
  if (!(options.presence_penalty >= -2.0f && options.presence_penalty <= 2.0f)) {
    return make_error("presence_penalty must be in [-2, 2]");
  }
  if (!(options.frequency_penalty >= -2.0f && options.frequency_penalty <= 2.0f)) {
    return make_error("frequency_penalty must be in [-2, 2]");
  }
  auto ok = options.validate();
  if (!ok) {
    // Drop the "sampling options: " prefix: API errors name the field first.
    std::string message = ok.error().message;
    const std::string prefix = "sampling options: ";
    if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
    return make_error(message);
  }
  return {};
}

}  // namespace pagoda::net
