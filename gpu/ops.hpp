// ops.hpp: the parameters of every compute op, as plain structs of pointers and
// sizes (no STL) so that the CPU twins (gpu/cpu) and the CUDA kernels
// (gpu/cuda) share them. The Backend (gpu/backend.hpp) has one virtual per op.
//
// Conventions for every op:
//  - All pointers point into the backend's memory (host memory for the CPU
//    backend, device memory for CUDA), including small index arrays. The op
//    neither owns nor keeps them after the call.
//  - Activations are fp32, row-major, one row per token. A "stride" is the
//    number of elements between the starts of consecutive token rows, so that
//    q/k/v can be views into one fused QKV GEMM output [T, (Hq + 2*Hk) * D].
//  - Shapes: T = num_tokens, Hq = q heads, Hk = kv heads, D = head_dim,
//    S = num_seqs, R = sampled rows, V = vocab. Element offsets are int64.
//  - Preconditions are the caller's job (debug builds assert some of them);
//    ops cannot fail at run time, except matmul, which may reject a format.
#pragma once

#include <cstdint>

#include "gpu/kv_cache_layout.hpp"
#include "gpu/weight_format.hpp"

namespace pagoda::gpu {

// ---- embedding (also used to gather the rows that need logits) ------------
// out[t, :] = table[ids[t], :]; an id outside [0, num_rows) gives a zero row.
struct EmbeddingParams {
  const float* table = nullptr;  // [num_rows, hidden]
  const int32_t* ids = nullptr;  // [T]
  float* out = nullptr;          // [T, hidden]; must not overlap table
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  int64_t num_rows = 0;          // vocab size (or T of the gathered tensor)
  // CPU backend only (CUDA rejects it): with table == nullptr, the rows are
  // read from quant_table, [num_rows, hidden] in table_format's row layout
  // (storage_bytes(table_format, hidden) bytes per row, any alignment), and
  // dequantized as they are gathered (gpu::dequantize_row: the same fp32
  // values as dequantizing the whole table first). So a quantized embedding
  // stays in its file's bytes instead of a V x H fp32 copy.
  const void* quant_table = nullptr;
  WeightFormat table_format = WeightFormat::F32;
};

// ---- RMSNorm, optionally fused with the residual add ------------------------
// Without residual:  out[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * weight.
// With residual (vLLM fused_add_rms_norm):
//     r = x[t] + residual[t];  residual[t] = r;  out[t] = rmsnorm(r) * weight.
// out may alias x (in place); residual must not alias x or out.
struct RmsNormParams {
  const float* x = nullptr;       // [T, hidden]
  float* residual = nullptr;      // [T, hidden] or nullptr (no fused add)
  const float* weight = nullptr;  // [hidden]
  float* out = nullptr;           // [T, hidden]
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  float eps = 1e-5f;
};

// ---- rotary position embedding (in place on q and k) ------------------------
// Rotates the first rotary_dim dims of every head of token t by angles
// positions[t] * inv_freq[i], i < rotary_dim/2 (inv_freq from a RopeTable, see
// gpu/rope_table.hpp; it already includes linear/llama3 scaling).
//  kNeox:        pairs (i, i + rotary_dim/2): HF rotate_half convention.
//  kInterleaved: pairs (2i, 2i + 1): GPT-J / llama.cpp "normal" rope, what
//                GGUF llama models need (their Q/K rows are permuted for it).
// For a pair (a, b) at angle th: a' = a cos th - b sin th, b' = b cos th + a sin th.
enum class RopeStyle : int32_t { kNeox = 0, kInterleaved = 1 };

struct RopeParams {
  float* q = nullptr;                // [T, Hq, D] rows q_stride apart
  float* k = nullptr;                // [T, Hk, D] rows k_stride apart; may be nullptr
  const int32_t* positions = nullptr;  // [T]
  const float* inv_freq = nullptr;   // [rotary_dim / 2]
  int64_t q_stride = 0;
  int64_t k_stride = 0;
  int32_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rotary_dim = 0;            // even, <= head_dim (== head_dim for Llama)
  RopeStyle style = RopeStyle::kNeox;
  // Multiplies cos and sin (longrope's attention factor): the rotated
  // elements come out scaled by it, the unrotated ones (rotary_dim..) do not.
  float scale = 1.0f;
};

// ---- SiLU(gate) * up ---------------------------------------------------------
// Packing (vLLM's): row t of x is [gate_0..gate_{I-1}, up_0..up_{I-1}], i.e. the
// fused gate|up GEMM output. out[t, i] = silu(x[t, i]) * x[t, I + i].
struct SiluMulParams {
  const float* x = nullptr;  // [T, 2 * I]
  float* out = nullptr;      // [T, I]; must not overlap x
  int32_t num_tokens = 0;
  int32_t intermediate = 0;  // I
};

// ---- GELU(gate) * up (GeGLU; Gemma) -----------------------------------------------
// The same packing and shapes as SiluMulParams: out[t, i] = gelu_tanh(x[t, i]) *
// x[t, I + i] with PyTorch's tanh approximation ("gelu_pytorch_tanh"):
// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))).
using GeluMulParams = SiluMulParams;

// ---- scale and soft-cap in place (Gemma: embedding x sqrt(H), final logits) ------
// x[i] := scale * x[i]; then, when cap > 0, x[i] := cap * tanh(x[i] / cap).
struct ScaleCapParams {
  float* x = nullptr;  // [n]
  int64_t n = 0;
  float scale = 1.0f;
  float cap = 0.0f;    // 0: no cap
};

// ---- write the new tokens' K/V into the paged cache ---------------------------
// For every t with slot_mapping[t] >= 0: cache[slot][h][:] = k[t, h, :] (and V).
// slot_mapping[t] == -1 marks a padding row (skipped). Slots must be distinct.
struct KvCacheWriteParams {
  const float* k = nullptr;  // [T, Hk, D] rows k_stride apart
  const float* v = nullptr;  // [T, Hk, D] rows v_stride apart
  int64_t k_stride = 0;
  int64_t v_stride = 0;
  void* k_cache = nullptr;   // one layer: [num_blocks, Hk, block_size, D] of dtype
  void* v_cache = nullptr;
  KvCacheLayout layout;
  KvDtype dtype = KvDtype::kF32;
  const int64_t* slot_mapping = nullptr;  // [T]
  int32_t num_tokens = 0;
};

// ---- the flattened batch, as attention sees it ---------------------------------
// One step mixes prefill chunks and decode tokens. Sequence s owns query rows
// [query_start_loc[s], query_start_loc[s+1]); rows >= query_start_loc[S] are
// padding (output 0). context_lens[s] counts the sequence's tokens in the cache
// after this step's write (so it is >= its number of query rows). Causality is
// bottom-right aligned: the i-th of the q_len rows of s (its position being
// context_lens[s] - q_len + i) attends keys [0, context_lens[s] - q_len + i].
// Decode is the q_len == 1 case. block_tables[s, b] is the physical block of
// logical block b; entries at or past ceil(context_lens[s] / block_size) are
// never read (they may hold anything). With block_table_rows set, sequence s
// uses row block_table_rows[s] of block_tables instead of row s, so that a
// persistent table (model::BlockTableArena: one row per running sequence,
// updated only where it changes) serves every step without a per-step copy.
struct AttentionMetadata {
  int32_t num_tokens = 0;                 // T (rows of q and out)
  int32_t num_seqs = 0;                   // S
  const int32_t* query_start_loc = nullptr;  // [S + 1], non-decreasing, [0] == 0
  const int32_t* context_lens = nullptr;     // [S]
  const int32_t* block_tables = nullptr;     // [S, max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  int32_t max_context_len = 0;            // >= every context_lens[s] (grid sizing)
  // [S] row of block_tables that sequence s uses; nullptr = row s. With it,
  // block_tables is [rows, max_blocks_per_seq] for any rows > every entry.
  const int32_t* block_table_rows = nullptr;
  // A host-side hint: >= every sequence's query rows this step, or 0 when
  // unknown. Backends may pick kernels by it: CUDA runs its tiled prefill
  // kernel only when it reaches BackendOptions::tiled_prefill_min_rows, and
  // then for exactly the sequences with that many rows, so which kernel
  // serves a row depends only on its own sequence.
  int32_t max_query_len = 0;
};

// ---- paged attention (decode, prefill and chunked prefill in one op) ---------
// out[t, hq, :] = softmax_j(scale * q[t, hq] . K[j, hq / G]) V[j, hq / G] over the
// keys row t may attend (see AttentionMetadata); G = Hq / Hk (GQA). The softmax
// is online in fp32. partition_size selects split-K: 0 = never split; > 0 =
// split each row's keys into partitions of that many tokens, each producing a
// partial output and a log-sum-exp, merged afterwards; -1 = let the backend
// decide (its choice may depend on the batch, so only 0 or > 0 give per-row
// results that are bitwise independent of the rest of the batch).
struct PagedAttentionParams {
  const float* q = nullptr;  // [T, Hq, D] rows q_stride apart
  int64_t q_stride = 0;
  float* out = nullptr;      // [T, Hq, D] packed; must not overlap q
  const void* k_cache = nullptr;  // one layer: [num_blocks, Hk, block_size, D]
  const void* v_cache = nullptr;
  KvCacheLayout layout;           // gives Hk, D, block_size, num_blocks
  KvDtype dtype = KvDtype::kF32;
  int32_t num_q_heads = 0;        // Hq, a multiple of Hk
  float scale = 0.0f;             // usually 1 / sqrt(D)
  int32_t partition_size = 0;
  AttentionMetadata meta;
  // Gemma (the CPU kernels; the CUDA kernels do not implement them yet and
  // model/ refuses such models on CUDA):
  // softcap > 0: each score s = scale * q.k becomes softcap * tanh(s / softcap)
  // before the softmax. sliding_window > 0: the row at position pos (its
  // kv_end - 1) attends only keys at positions > pos - sliding_window, i.e.
  // keys [max(0, kv_end - sliding_window), kv_end); blocks wholly before
  // that are not read.
  float softcap = 0.0f;
  int32_t sliding_window = 0;
};

// ---- copy whole blocks (copy-on-write), every layer, K and V --------------------
// For each pair p: block block_pairs[2p + 1] := block block_pairs[2p] in every
// layer's K and V. Destinations must be distinct and must not be sources.
struct CopyBlocksParams {
  void* const* k_layers = nullptr;  // [num_layers] per-layer K cache pointers
  void* const* v_layers = nullptr;  // [num_layers]
  int32_t num_layers = 0;
  const int32_t* block_pairs = nullptr;  // [num_pairs, 2]: (src, dst)
  int32_t num_pairs = 0;
  KvCacheLayout layout;
  KvDtype dtype = KvDtype::kF32;
};

// ---- sampling ---------------------------------------------------------------------
// Per row of logits, in this order (vLLM v1 semantics):
//  1. penalties: repetition (HF: over the distinct tokens of prompt + output, a
//     positive logit is divided by the penalty, a negative one multiplied), then
//     frequency (minus frequency_penalty * count in output) and presence (minus
//     presence_penalty once per token present in output) (OpenAI);
//  2. temperature < kGreedyTemperature: greedy, argmax, lowest index on ties;
//     otherwise z = logits / temperature, then the survivors are filtered:
//     min_p (keep z >= max z + log(min_p)), then top_k (keep z >= the k-th
//     largest surviving z: ties at the threshold all survive), then top_p (sort
//     survivors by z descending; n = fewest with mass >= top_p * survivor mass;
//     keep z >= the n-th z), where mass is sum exp(z - max z);
//  3. a draw among the survivors by the exponential race argmax exp(z_i - max z) / E_i,
//     E_i = -log(u_i), u_i = philox_sampling_uniform(seed, step, i) (gpu/philox.hpp),
//     ties to the lowest index: the token depends only on (logits row, params,
//     seed, step), not on the batch or the thread layout.
// Logprobs (vLLM's default logprobs_mode "raw_logprobs"): log-softmax of the
// row's raw logits, before penalties and temperature; kProcessed uses the
// logits after penalties and temperature (greedy rows: after penalties only),
// before the min_p/top_k/top_p filters. Top candidates come from the same
// distribution.
constexpr float kGreedyTemperature = 1e-5f;  // vLLM's _SAMPLING_EPS
constexpr int32_t kMaxTopLogprobs = 20;

enum class LogprobMode : int32_t { kRaw = 0, kProcessed = 1 };

struct SamplingRowParams {
  float temperature = 1.0f;
  int32_t top_k = 0;                  // <= 0: off
  float top_p = 1.0f;                 // >= 1: off
  float min_p = 0.0f;                 // <= 0: off
  float repetition_penalty = 1.0f;    // 1: off; must be > 0
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;                  // e.g. the sequence's output length so far
  int32_t num_top_logprobs = 0;       // 0..kMaxTopLogprobs candidates to report
  // The row's token history inside SamplingParams::history (may be shared by rows).
  int64_t prompt_offset = 0;
  int32_t prompt_len = 0;
  int64_t output_offset = 0;
  int32_t output_len = 0;
  // Tokens that must not be sampled (e.g. EOS before min_tokens): their
  // logits become -inf after the penalties; the reported logprobs (kRaw) are
  // unaffected. A span of SamplingParams::history.
  int64_t banned_offset = 0;
  int32_t banned_len = 0;
  // Additive logit biases (OpenAI logit_bias): bias_len pairs (id, bias as
  // float bits) at history[bias_offset + 2i], added after the penalties.
  int64_t bias_offset = 0;
  int32_t bias_len = 0;
  // Token mask (structured output, allowed ids, bad words): with mask_words
  // > 0, token t may be sampled only when bit (t & 31) of the int32 word
  // history[mask_offset + (t >> 5)] is set; the others become -inf after the
  // bias and the bans, and the row's kRaw logprobs (and top candidates) are
  // those of the raw logits over the allowed tokens only (vLLM's order: the
  // grammar's bitmask is applied to the logits before the sampler).
  int64_t mask_offset = 0;
  int32_t mask_words = 0;
};

struct SamplingParams {
  const float* logits = nullptr;          // [R, V]; not modified
  const SamplingRowParams* rows = nullptr;  // [R]
  const int32_t* history = nullptr;       // token ids referenced by the rows' spans
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
  LogprobMode logprob_mode = LogprobMode::kRaw;
  // Outputs.
  int32_t* tokens = nullptr;      // [R]
  float* logprobs = nullptr;      // [R]: logprob of tokens[r]
  int32_t* top_tokens = nullptr;  // [R, top_stride] or nullptr: best first, ties by index
  float* top_logprobs = nullptr;  // [R, top_stride]; entries past num_top_logprobs: -1 / -inf
  int32_t top_stride = kMaxTopLogprobs;
};

// ---- matmul (slot: wired by the lead to gpu/cpu/quant_matmul and cuBLAS) ---------
// y[m, :] = x[m, :] . W^T (+ bias), W a LinearWeight [N, K] (gpu/weight_format.hpp).
struct MatmulParams {
  const float* x = nullptr;     // [M, K] rows x_stride apart
  int64_t x_stride = 0;
  LinearWeight weight;          // [N, K]
  const float* bias = nullptr;  // [N] or nullptr
  float* y = nullptr;           // [M, N] packed
  int64_t m = 0;
};

}  // namespace pagoda::gpu
