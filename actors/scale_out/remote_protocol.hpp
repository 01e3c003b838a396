// The engine-node protocol (scale-out, docs/scaling.md): what a front end's
// router actor (actors/scale_out/engine_router.hpp) and an engine node's entry actor
// (actors/scale_out/engine_node.hpp) send each other over CAF's io middleman (BASP
// over TCP). Every type here has an `inspect` overload and is registered
// with add_message_type by add_remote_message_types() on both sides; the
// wire carries token ids, never text (each side has the tokenizer).
//
//   front -> node  request (hello_atom, uint32 version) -> NodeHello
//                  first message of a connection; a node of another
//                  kRemoteProtocolVersion answers an error naming both versions
//   front -> node  request (report_atom) -> NodeReport   polled (liveness + load)
//   front -> node  request (kv_atom) -> KvSnapshot       the node's block pool (KV map),
//                                                polled only while someone watches it;
//                                                owners' request ids are this front
//                                                end's wire ids (0: another front end's)
//   front -> node  (submit_atom, WireSubmit)     start a request (prompt ids)
//   front -> node  (rcancel_atom, uint64 wire)   drop it (blocks freed)
//   node -> front  (revents_atom, WireEvents)    tokens / beams / finishes, in order;
//                                                the last event has group_done
//   node -> front  (rfail_atom, uint64 wire, string message)  the node failed it
// `wire` is the router's id of one submission (a retry on another node gets a
// new one), unique per front end; the node keys requests by (front, wire).
// The node monitors each front end: when one goes down every request it sent
// is cancelled. Bump kRemoteProtocolVersion on any change to these types.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/beam_search.hpp"
#include "actors/block_manager.hpp"
#include "actors/engine_types.hpp"
#include "actors/sampling_options.hpp"
#include "actors/scheduler_core.hpp"
#include "actors/step_plan.hpp"

namespace pagoda::actors {

// 2: WireSubmit carries the output constraint (issue 23); 3: and speculative.draft (issue 24);
// 4: NodeReport carries the speculative counters by proposer; 5: and the queue-time histogram
inline constexpr uint32_t kRemoteProtocolVersion = 5;

using hello_atom = caf::atom_constant<caf::atom("hello")>;
using report_atom = caf::atom_constant<caf::atom("report")>;
using submit_atom = caf::atom_constant<caf::atom("submit")>;
using rcancel_atom = caf::atom_constant<caf::atom("rcancel")>;
using revents_atom = caf::atom_constant<caf::atom("revents")>;
using rfail_atom = caf::atom_constant<caf::atom("rfail")>;
using kv_atom = caf::atom_constant<caf::atom("kv")>;

// The node's answer to hello: what the front end checks and routes by.
struct NodeHello {
  uint32_t version = 0;
  std::string model_name, model_path;
  int32_t vocab_size = 0, block_size = 0, num_blocks = 0, max_model_len = 0, max_num_seqs = 0;
};

// A node's load and prefix cache, as the router scores it. cached_hashes:
// chained block hashes (route_policy.hpp) of the prompts and outputs it
// served most recently, newest first, at most as many as it has blocks.
struct NodeReport {
  int32_t running = 0, waiting = 0, running_seqs = 0;
  int32_t blocks_total = 0, blocks_used = 0, blocks_free = 0, blocks_cached = 0;
  uint64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;
  uint64_t prompt_tokens = 0, generation_tokens = 0, steps = 0, preemptions = 0;
  uint64_t urgent_prefill_steps = 0;
  SpecStats spec;  // speculative decoding totals, by proposer
  LatencyHistogram queue;  // the node's queue times (EngineStats::queue)
  std::vector<uint64_t> cached_hashes;
};

// One request for a node: prompt ids and sampling options (seed resolved).
struct WireSubmit {
  uint64_t wire = 0;
  std::vector<int32_t> prompt;
  SamplingOptions options;  // options.seed is carried as `seed`
  uint64_t seed = 0;
};

struct WireEvents {
  uint64_t wire = 0;
  std::vector<SeqEvent> events;
};

template <class I>
typename I::result_type inspect(I& f, NodeHello& x) {
  return f(caf::meta::type_name("pagoda.NodeHello"), x.version, x.model_name, x.model_path, x.vocab_size,
           x.block_size, x.num_blocks, x.max_model_len, x.max_num_seqs);
}

template <class I>
typename I::result_type inspect(I& f, SpecCounters& x) {
  return f(caf::meta::type_name("pagoda.SpecCounters"), x.drafted, x.accepted);
}

template <class I>
typename I::result_type inspect(I& f, SpecStats& x) {
  return f(caf::meta::type_name("pagoda.SpecStats"), x.ngram, x.draft);
}

template <class I>
typename I::result_type inspect(I& f, LatencyHistogram& x) {
  return f(caf::meta::type_name("pagoda.LatencyHistogram"), x.count, x.sum, x.counts);
}

template <class I>
typename I::result_type inspect(I& f, NodeReport& x) {
  return f(caf::meta::type_name("pagoda.NodeReport"), x.running, x.waiting, x.running_seqs, x.blocks_total,
           x.blocks_used, x.blocks_free, x.blocks_cached, x.prefix_queried_tokens, x.prefix_hit_tokens,
           x.prompt_tokens, x.generation_tokens, x.steps, x.preemptions, x.urgent_prefill_steps, x.spec,
           x.queue, x.cached_hashes);
}

template <class I>
typename I::result_type inspect(I& f, OutputConstraint& x) {
  return f(caf::meta::type_name("pagoda.OutputConstraint"), x.kind, x.spec, x.choices, x.strict);
}

template <class I>
typename I::result_type inspect(I& f, TokenMaskOptions& x) {
  return f(caf::meta::type_name("pagoda.TokenMaskOptions"), x.logit_bias, x.allowed_token_ids, x.bad_words);
}

template <class I>
typename I::result_type inspect(I& f, WireSubmit& x) {
  SamplingOptions& o = x.options;
  return f(caf::meta::type_name("pagoda.WireSubmit"), x.wire, x.prompt, x.seed, o.temperature, o.top_k, o.top_p,
           o.min_p, o.repetition_penalty, o.presence_penalty, o.frequency_penalty, o.stop, o.stop_token_ids,
           o.max_tokens, o.min_tokens, o.ignore_eos, o.logprobs, o.n, o.beam_width, o.length_penalty,
           o.early_stopping, o.priority, o.client, o.constraint, o.token_mask, o.speculative.set,
           o.speculative.ngram, o.speculative.draft, o.speculative.config.min_n, o.speculative.config.max_n,
           o.speculative.config.k);
}

template <class I>
typename I::result_type inspect(I& f, SampleOutput& x) {
  return f(caf::meta::type_name("pagoda.SampleOutput"), x.seq, x.token, x.logprob, x.top_tokens, x.top_logprobs);
}

template <class I>
typename I::result_type inspect(I& f, BeamResult& x) {
  return f(caf::meta::type_name("pagoda.BeamResult"), x.tokens, x.cumulative_logprob, x.score, x.finish);
}

template <class I>
typename I::result_type inspect(I& f, SeqEvent& x) {
  return f(caf::meta::type_name("pagoda.SeqEvent"), x.request, x.index, x.has_token, x.sample, x.finish,
           x.group_done, x.error, x.beam, x.beam_final, x.beams, x.spec_drafted, x.spec_accepted);
}

template <class I>
typename I::result_type inspect(I& f, PrefixCacheStats& x) {
  return f(caf::meta::type_name("pagoda.PrefixCacheStats"), x.queried_tokens, x.hit_tokens, x.evicted_blocks);
}

template <class I>
typename I::result_type inspect(I& f, BlockSnapshot& x) {
  return f(caf::meta::type_name("pagoda.BlockSnapshot"), x.state, x.ref_count, x.seqs);
}

template <class I>
typename I::result_type inspect(I& f, SeqSnapshot& x) {
  return f(caf::meta::type_name("pagoda.SeqSnapshot"), x.seq, x.num_tokens, x.table);
}

template <class I>
typename I::result_type inspect(I& f, PoolSnapshot& x) {
  return f(caf::meta::type_name("pagoda.PoolSnapshot"), x.block_size, x.total_blocks, x.free_blocks,
           x.cached_blocks, x.used_blocks, x.watermark_blocks, x.stats, x.blocks, x.seqs);
}

template <class I>
typename I::result_type inspect(I& f, SeqOwner& x) {
  return f(caf::meta::type_name("pagoda.SeqOwner"), x.seq, x.request, x.index);
}

// `pools` stays home: only the front end joins pools (RemoteEngine).
template <class I>
typename I::result_type inspect(I& f, KvSnapshot& x) {
  return f(caf::meta::type_name("pagoda.KvSnapshot"), x.pool, x.owners);
}

template <class I>
typename I::result_type inspect(I& f, WireEvents& x) {
  return f(caf::meta::type_name("pagoda.WireEvents"), x.wire, x.events);
}

// Registers every type above (call on the config before the system starts;
// both the front end and the node must).
void add_remote_message_types(caf::actor_system_config& config);

}  // namespace pagoda::actors
