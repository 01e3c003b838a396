// Structured-output fields from JSON (net/constraint_json.hpp).
#include "net/constraint_json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace pagoda::net {
namespace {

using actors::OutputConstraint;
using simdjson::dom::element;
using simdjson::dom::element_type;
using Kind = OutputConstraint::Kind;

Error field_error(std::string_view key, const std::string& what) { return make_error(std::string(key) + " " + what); }

// Sets the request's one constraint (a second one is an error).
Result<bool> set(std::string_view key, actors::SamplingOptions& o, Kind kind, std::string spec,
                 std::vector<std::string> choices = {}, bool strict = false) {
  if (o.constraint.active()) return field_error(key, "conflicts with another output constraint in the request");
  if (spec.size() > kMaxConstraintBytes) return field_error(key, "is too large");
  o.constraint = OutputConstraint{kind, std::move(spec), std::move(choices), strict};
  return true;
}

// A JSON schema given as an object (or boolean) or as its JSON text.
Result<std::string> schema_text(std::string_view key, element v) {
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) {
    simdjson::dom::parser p;
    element doc;
    const std::string copy(s);
    if (p.parse(copy).get(doc) != simdjson::SUCCESS) return field_error(key, "is not valid JSON");
    if (doc.type() != element_type::OBJECT && doc.type() != element_type::BOOL) {
      return field_error(key, "must be a JSON schema object");
    }
    return copy;
  }
  if (v.type() != element_type::OBJECT && v.type() != element_type::BOOL) {
    return field_error(key, "must be a JSON schema object");
  }
  return simdjson::to_string(v);
}

Result<std::string> string_of(std::string_view key, element v) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return field_error(key, "must be a string");
  if (s.empty()) return field_error(key, "must not be empty");
  return std::string(s);
}

Result<std::vector<std::string>> choices_of(std::string_view key, element v) {
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return field_error(key, "must be an array of strings");
  if (arr.size() == 0) return field_error(key, "must not be empty (the choice list is empty)");
  if (arr.size() > kMaxChoices) return field_error(key, "has too many choices");
  std::vector<std::string> out;
  for (element item : arr) {
    std::string_view s;
    if (item.get_string().get(s) != simdjson::SUCCESS) return field_error(key, "must be an array of strings");
    out.emplace_back(s);
  }
  return out;
}

Result<bool> json_schema_format(element v, actors::SamplingOptions& o) {
  const std::string key = "response_format.json_schema";
  simdjson::dom::object obj;
  if (v["json_schema"].get_object().get(obj) != simdjson::SUCCESS) return field_error(key, "must be an object");
  std::string_view name;
  if (obj["name"].get_string().get(name) != simdjson::SUCCESS) return field_error(key + ".name", "is required");
  bool strict = false;
  element s;
  if (obj["strict"].get(s) == simdjson::SUCCESS && !s.is_null() && s.get_bool().get(strict) != simdjson::SUCCESS) {
    return field_error(key + ".strict", "must be a boolean");
  }
  element schema;
  if (obj["schema"].get(schema) != simdjson::SUCCESS || schema.is_null()) {
    return field_error(key + ".schema", "is required");
  }
  auto text = schema_text(key + ".schema", schema);
  if (!text) return text.error();
  return set("response_format", o, Kind::json_schema, std::move(text).value(), {}, strict);
}

Result<bool> response_format(element v, actors::SamplingOptions& o) {
  std::string_view type;
  if (v.type() != element_type::OBJECT || v["type"].get_string().get(type) != simdjson::SUCCESS) {
    return make_error("response_format must be an object with a string `type`");
  }
  if (type == "text") return true;
  if (type == "json_object") return set("response_format", o, Kind::json_object, "");
  if (type == "json_schema") return json_schema_format(v, o);
  if (type == "structural_tag") return set("response_format", o, Kind::structural_tag, simdjson::to_string(v));
  return make_error("response_format.type must be text, json_object, json_schema or structural_tag");
}

Result<bool> structured_outputs(element v, actors::SamplingOptions& o) {
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return make_error("structured_outputs must be an object");
  for (auto f : obj) {
    const std::string key = "structured_outputs." + std::string(f.key);
    if (f.value.is_null()) continue;
    Result<bool> r = true;
    if (f.key == "json") {
      auto t = schema_text(key, f.value);
      r = t ? set(key, o, Kind::json_schema, std::move(t).value()) : Result<bool>(t.error());
    } else if (f.key == "regex" || f.key == "grammar" || f.key == "structural_tag") {
      auto t = string_of(key, f.value);
      const Kind k = f.key == "regex" ? Kind::regex : f.key == "grammar" ? Kind::grammar : Kind::structural_tag;
      r = t ? set(key, o, k, std::move(t).value()) : Result<bool>(t.error());
    } else if (f.key == "choice") {
      auto c = choices_of(key, f.value);
      r = c ? set(key, o, Kind::choice, "", std::move(c).value()) : Result<bool>(c.error());
    } else if (f.key == "json_object") {
      bool b = false;
      if (f.value.get_bool().get(b) != simdjson::SUCCESS) return field_error(key, "must be a boolean");
      if (b) r = set(key, o, Kind::json_object, "");
    } else if (f.key == "disable_fallback" || f.key == "disable_any_whitespace" ||
               f.key == "disable_additional_properties") {
      bool b = false;
      if (f.value.get_bool().get(b) != simdjson::SUCCESS) return field_error(key, "must be a boolean");
    } else {
      return make_error("unknown field '" + key + "'");
    }
    if (!r) return r;
  }
  return true;
}

Result<bool> guided_field(std::string_view key, element v, actors::SamplingOptions& o) {
  if (key == "guided_json") {
    auto t = schema_text(key, v);
    return t ? set(key, o, Kind::json_schema, std::move(t).value()) : Result<bool>(t.error());
  }
  if (key == "guided_choice") {
    auto c = choices_of(key, v);
    return c ? set(key, o, Kind::choice, "", std::move(c).value()) : Result<bool>(c.error());
  }
  if (key == "guided_decoding_backend") return true;
  auto t = string_of(key, v);  // guided_regex, guided_grammar
  return t ? set(key, o, key == "guided_regex" ? Kind::regex : Kind::grammar, std::move(t).value())
           : Result<bool>(t.error());
}

Result<bool> logit_bias(element v, actors::SamplingOptions& o) {
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return make_error("logit_bias must be an object");
  if (obj.size() > kMaxLogitBias) return make_error("logit_bias has too many entries");
  o.token_mask.logit_bias.clear();
  for (auto f : obj) {
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(f.key.data(), f.key.data() + f.key.size(), id);
    if (ec != std::errc() || end != f.key.data() + f.key.size() || id < 0) {
      return make_error("logit_bias keys must be token ids (non-negative integers), not '" + std::string(f.key) + "'");
    }
    double b = 0.0;
    const element_type t = f.value.type();
    if ((t != element_type::INT64 && t != element_type::UINT64 && t != element_type::DOUBLE) ||
        f.value.get_double().get(b) != simdjson::SUCCESS || !(b >= -100.0 && b <= 100.0)) {
      return make_error("logit_bias values must be numbers in [-100, 100]");
    }
    o.token_mask.logit_bias.emplace_back(id, float(b));
  }
  return true;
}

Result<bool> token_lists(std::string_view key, element v, actors::SamplingOptions& o) {
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return field_error(key, "must be an array");
  if (key == "allowed_token_ids") {
    if (arr.size() > kMaxAllowedIds) return field_error(key, "has too many ids");
    o.token_mask.allowed_token_ids.clear();
    for (element item : arr) {
      int64_t id = -1;
      if (item.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX) {
        return field_error(key, "must hold non-negative integers");
      }
      o.token_mask.allowed_token_ids.push_back(int32_t(id));
    }
    return true;
  }
  if (arr.size() > kMaxBadWords) return field_error(key, "has too many words");
  o.token_mask.bad_words.clear();
  for (element item : arr) {
    std::string_view s;
    if (item.get_string().get(s) != simdjson::SUCCESS || s.empty() || s.size() > 256) {
      return field_error(key, "must hold non-empty strings of at most 256 bytes");
    }
    o.token_mask.bad_words.emplace_back(s);
  }
  return true;
}

}  // namespace

Result<bool> apply_constraint_field(std::string_view key, element value, actors::SamplingOptions& options) {
  static constexpr std::string_view kNames[] = {
      "response_format", "structured_outputs", "guided_json", "guided_regex", "guided_choice",
      "guided_grammar", "guided_decoding_backend", "logit_bias", "allowed_token_ids", "bad_words"};
  if (std::find(std::begin(kNames), std::end(kNames), key) == std::end(kNames)) return false;
  if (value.is_null()) return true;
  if (key == "response_format") return response_format(value, options);
  if (key == "structured_outputs") return structured_outputs(value, options);
  if (key == "logit_bias") return logit_bias(value, options);
  if (key == "allowed_token_ids" || key == "bad_words") return token_lists(key, value, options);
  return guided_field(key, value, options);
}

}  // namespace pagoda::net
