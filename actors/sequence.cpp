#include "actors/sequence.hpp"

namespace pagoda::actors {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::none: return "";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::abort: return "abort";
    case FinishReason::error: return "error";
  }
  return "";
}

int32_t SequenceGroup::num_live() const {
  if (!forked) return seqs.empty() || seqs[0].finished() ? 0 : 1;
  int32_t n = 0;
  for (const Sequence& s : seqs) n += s.finished() ? 0 : 1;
  return n;
}

bool SequenceGroup::all_finished() const {
  for (const Sequence& s : seqs) {
    if (!s.finished()) return false;
  }
  return true;
}

}  // namespace pagoda::actors
