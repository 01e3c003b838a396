// Fuzz target: the sampling-parameter reader (net/sampling_json), as both
// the OpenAI routes and the /v1/ws protocol drive it: every field of a JSON
// object through apply_sampling_field, then finish_sampling.
// Invariants: options that finish_sampling accepts pass validate(); a
// rejected field's error names something (non-empty message).
#include <simdjson.h>

#include "fuzz_util.hpp"
#include "net/sampling_json.hpp"

using namespace pagoda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(data, size).get(doc) != simdjson::SUCCESS) return 0;
  simdjson::dom::object obj;
  if (doc.get(obj) != simdjson::SUCCESS) return 0;
  actors::SamplingOptions options;
  bool beam = false;
  for (auto [key, value] : obj) {
    auto applied = net::apply_sampling_field(key, value, options, beam);
    if (!applied) {
      FUZZ_CHECK(!applied.error().message.empty(), "a field error has a message");
      return 0;
    }
  }
  auto ok = net::finish_sampling(options, beam);
  if (ok) {
    FUZZ_CHECK(options.validate().ok(), "finished options validate");
    FUZZ_CHECK(options.beam_width >= 0 && options.beam_width <= actors::SamplingOptions::kMaxBeamWidth,
               "beam width in range");
    FUZZ_CHECK(options.n >= 1, "n is at least 1");
  } else {
    FUZZ_CHECK(!ok.error().message.empty(), "a validation error has a message");
  }
  return 0;
}
