// verify_drafts (see speculative_verify.hpp).
#include "actors/speculative_verify.hpp"

#include <cassert>

namespace pagoda::actors {

VerifyOutcome verify_drafts(std::span<const int32_t> drafts,
                            std::span<const int32_t> target_samples) {
  assert(target_samples.size() == drafts.size() + 1);
  VerifyOutcome out;
  size_t j = 0;
  while (j < drafts.size() && drafts[j] == target_samples[j]) ++j;
  out.accepted = int32_t(j);
  out.tokens.assign(target_samples.begin(), target_samples.begin() + std::ptrdiff_t(j + 1));
  return out;
}

}  // namespace pagoda::actors
