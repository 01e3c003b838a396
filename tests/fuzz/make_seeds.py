#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ (small, hand-made
inputs covering each format's main paths). Run from anywhere; files are
rewritten in place. Crash reproducers found by fuzzing are added to the
corpus folders by hand (named crash-*) and are not produced here."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- GGUF --------------------------------------------------------------------
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def gguf(kvs, tensors, version=3, align=32):
    """tensors: (name, dims, ggml_type, data bytes)."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    infos, blobs, off = b"", b"", 0
    for name, dims, t, data in tensors:
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", t, off)
        blobs += data + b"\0" * ((-len(data)) % align)
        off += len(data) + (-len(data)) % align
    out = head + infos
    out += b"\0" * ((-len(out)) % align)
    return out + blobs


def u32(key, v):
    return kv(key, 4, struct.pack("<I", v))


def f32(key, v):
    return kv(key, 6, struct.pack("<f", v))


def s(key, v):
    return kv(key, 8, gstr(v))


def sarr(key, items):
    return kv(key, 9, struct.pack("<IQ", 8, len(items)) + b"".join(gstr(i) for i in items))


def iarr(key, items):
    return kv(key, 9, struct.pack("<IQ", 5, len(items)) + b"".join(struct.pack("<i", i) for i in items))


def tiny_llama_gguf():
    H, L, V, I, heads = 32, 1, 8, 64, 2
    tokens = ["<s>", "</s>", "a", "b", "c", "Ġ", "ab", "Ġa"]
    kvs = [s("general.architecture", "llama"), u32("llama.block_count", L),
           u32("llama.embedding_length", H), u32("llama.attention.head_count", heads),
           u32("llama.attention.head_count_kv", heads), u32("llama.feed_forward_length", I),
           u32("llama.context_length", 64), f32("llama.attention.layer_norm_rms_epsilon", 1e-5),
           f32("llama.rope.freq_base", 10000.0), s("tokenizer.ggml.model", "gpt2"),
           sarr("tokenizer.ggml.tokens", tokens), iarr("tokenizer.ggml.token_type", [3, 3] + [1] * 6),
           sarr("tokenizer.ggml.merges", ["a b", "Ġ a"]), u32("tokenizer.ggml.bos_token_id", 0),
           u32("tokenizer.ggml.eos_token_id", 1)]

    def f32s(n, v=0.01):
        return struct.pack("<%df" % n, *([v] * n))

    ts = [("token_embd.weight", [H, V], 0, f32s(H * V)), ("output_norm.weight", [H], 0, f32s(H, 1.0)),
          ("output.weight", [H, V], 0, f32s(H * V))]
    for l in range(L):
        p = "blk.%d." % l
        ts += [(p + "attn_norm.weight", [H], 0, f32s(H, 1.0)), (p + "attn_q.weight", [H, H], 0, f32s(H * H)),
               (p + "attn_k.weight", [H, H], 0, f32s(H * H)), (p + "attn_v.weight", [H, H], 0, f32s(H * H)),
               (p + "attn_output.weight", [H, H], 0, f32s(H * H)), (p + "ffn_norm.weight", [H], 0, f32s(H, 1.0)),
               (p + "ffn_gate.weight", [H, I], 0, f32s(H * I)), (p + "ffn_up.weight", [H, I], 0, f32s(H * I)),
               (p + "ffn_down.weight", [I, H], 0, f32s(H * I))]
    return gguf(kvs, ts)


# The block-quantized types the loader dequantizes beyond Q8_0/Q4_0/Q4_1:
# ggml type id -> (elements per block, bytes per block, fp16 scale offsets).
QUANT_TYPES = {6: (32, 22, [0]), 7: (32, 24, [0, 2]), 20: (32, 18, [0]),
               10: (256, 84, [80, 82]), 11: (256, 110, [108]), 12: (256, 144, [0, 2]),
               13: (256, 176, [0, 2]), 14: (256, 210, [208]), 23: (256, 136, [0])}


def quant_blocks(rng, t, n_elems):
    """Random blocks of type t with finite fp16 scales (|d| <= 1/64)."""
    elems, size, halves = QUANT_TYPES[t]
    out = b""
    for _ in range(n_elems // elems):
        b = bytearray(rng.randbytes(size))
        for off in halves:
            b[off:off + 2] = struct.pack("<e", rng.uniform(-1.0, 1.0) / 64)
        out += bytes(b)
    return out


def tiny_llama_quant_gguf(down_type, small_type, seed):
    """tiny_llama_gguf's model with I = 256 so that ffn_down ([H, I], rows of
    I) can hold a 256-element type; the other matrices (rows of H = 32) hold a
    32-element type; Q and K share one, V another (a mixed fused group)."""
    import random
    rng = random.Random(seed)
    H, V, I, heads = 32, 8, 256, 2
    tokens = ["<s>", "</s>", "a", "b", "c", "Ġ", "ab", "Ġa"]
    kvs = [s("general.architecture", "llama"), u32("llama.block_count", 1),
           u32("llama.embedding_length", H), u32("llama.attention.head_count", heads),
           u32("llama.attention.head_count_kv", heads), u32("llama.feed_forward_length", I),
           u32("llama.context_length", 64), f32("llama.attention.layer_norm_rms_epsilon", 1e-5),
           f32("llama.rope.freq_base", 10000.0), s("tokenizer.ggml.model", "gpt2"),
           sarr("tokenizer.ggml.tokens", tokens), iarr("tokenizer.ggml.token_type", [3, 3] + [1] * 6),
           sarr("tokenizer.ggml.merges", ["a b", "Ġ a"]), u32("tokenizer.ggml.bos_token_id", 0),
           u32("tokenizer.ggml.eos_token_id", 1)]
    other = 7 if small_type != 7 else 20

    def f32s(n, v=0.01):
        return struct.pack("<%df" % n, *([v] * n))

    ts = [("token_embd.weight", [H, V], small_type, quant_blocks(rng, small_type, H * V)),
          ("output_norm.weight", [H], 0, f32s(H, 1.0))]
    p = "blk.0."
    ts += [(p + "attn_norm.weight", [H], 0, f32s(H, 1.0)),
           (p + "attn_q.weight", [H, H], small_type, quant_blocks(rng, small_type, H * H)),
           (p + "attn_k.weight", [H, H], small_type, quant_blocks(rng, small_type, H * H)),
           (p + "attn_v.weight", [H, H], other, quant_blocks(rng, other, H * H)),
           (p + "attn_output.weight", [H, H], small_type, quant_blocks(rng, small_type, H * H)),
           (p + "ffn_norm.weight", [H], 0, f32s(H, 1.0)),
           (p + "ffn_gate.weight", [H, I], small_type, quant_blocks(rng, small_type, H * I)),
           (p + "ffn_up.weight", [H, I], small_type, quant_blocks(rng, small_type, H * I)),
           (p + "ffn_down.weight", [I, H], down_type, quant_blocks(rng, down_type, H * I))]
    return gguf(kvs, ts)


def gguf_seeds():
    put("gguf", "tiny_llama.seed", tiny_llama_gguf())
    # One tiny model per 256-element type in ffn_down (no output.weight: a
    # tied, quantized lm_head), the 32-element ones rotating elsewhere.
    names = {10: "q2_k", 11: "q3_k", 12: "q4_k", 13: "q5_k", 14: "q6_k", 23: "iq4_xs"}
    small = [6, 7, 20]
    for i, (t, name) in enumerate(sorted(names.items())):
        put("gguf", "tiny_llama_%s.seed" % name, tiny_llama_quant_gguf(t, small[i % 3], 100 + t))
    every = [kv("u8", 0, b"\x01"), kv("i8", 1, b"\xff"), kv("u16", 2, b"\x01\x02"), kv("i16", 3, b"\xfe\xff"),
             u32("u32", 7), kv("i32", 5, struct.pack("<i", -7)), f32("f32", 0.5), kv("bool", 7, b"\x01"),
             s("str", "hi"), kv("u64", 10, struct.pack("<Q", 9)), kv("i64", 11, struct.pack("<q", -9)),
             kv("f64", 12, struct.pack("<d", 2.5)), u32("general.alignment", 64),
             kv("nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 2) + struct.pack("<II", 1, 2))]
    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    q4_0 = struct.pack("<e", 0.5) + bytes(16)
    q4_1 = struct.pack("<ee", 0.5, -1.0) + bytes(16)
    ts = [("f32", [4], 0, struct.pack("<4f", 1, 2, 3, 4)), ("f16", [2, 2], 1, struct.pack("<4e", 1, 2, 3, 4)),
          ("q8_0", [32], 8, q8), ("q4_0", [32], 2, q4_0), ("q4_1", [32], 3, q4_1),
          ("bf16", [2], 30, b"\x80\x3f\x00\x40")]
    put("gguf", "every_type_v3.seed", gguf(every, ts, align=64))
    import random
    rng = random.Random(5)
    qs = [("type_%d" % t, [QUANT_TYPES[t][0] * 2], t, quant_blocks(rng, t, QUANT_TYPES[t][0] * 2))
          for t in sorted(QUANT_TYPES)]
    put("gguf", "every_quant_type_v3.seed", gguf([], qs))
    put("gguf", "v2_empty.seed", gguf([], [], version=2))


# ---- safetensors ----------------------------------------------------------------
def safetensors(entries, meta=None):
    header, blob = {}, b""
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


def safetensors_seeds():
    put("safetensors", "three_dtypes.safetensors",
        safetensors([("a", "F32", [2], struct.pack("<2f", 1, 2)), ("b", "F16", [1, 2], struct.pack("<2e", 1, 2)),
                     ("c", "BF16", [2], b"\x80\x3f\x00\x40")], {"format": "pt"}))
    put("safetensors", "empty_tensor.safetensors", safetensors([("z", "F32", [0, 3], b"")]))
    put("safetensors", "bad_dtype.safetensors", safetensors([("i", "I64", [1], b"\0" * 8)]))


# ---- JSON bodies and frames ------------------------------------------------------
def json_seeds():
    completions = [
        {"model": "smollm2", "prompt": "Hello", "max_tokens": 8, "temperature": 0},
        {"prompt": [1, 2, 3], "stream": True, "stream_options": {"include_usage": True}, "logprobs": 2},
        {"prompt": ["one"], "n": 2, "seed": 7, "stop": ["\n", "."], "top_p": 0.9, "top_k": 5},
        {"prompt": [[5, 6]], "use_beam_search": True, "beam_width": 3, "n": 2, "length_penalty": 0.5},
        {"prompt": "x", "echo": False, "suffix": None, "best_of": 1, "logit_bias": {}, "user": "u"},
        {"prompt": "x", "unknown_field": 1},
    ]
    chat = [
        {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 4},
        {"messages": [{"role": "system", "content": "s"}, {"role": "developer", "content": "d"},
                      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                      {"role": "assistant", "content": None, "name": "bot"}],
         "logprobs": True, "top_logprobs": 3, "stream": True, "tools": [], "tool_choice": "none",
         "response_format": {"type": "text"}},
        {"messages": [], "model": "other"},
    ]
    for i, b in enumerate(completions):
        put("openai_request", "completion_%d" % i, "0" + json.dumps(b))
    for i, b in enumerate(chat):
        put("openai_request", "chat_%d" % i, "1" + json.dumps(b))
    put("openai_request", "bad_json", "1{\"messages\": [")
    sampling = [
        {"temperature": 0.7, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repetition_penalty": 1.1,
         "presence_penalty": 0.5, "frequency_penalty": -0.5, "seed": 1, "stop": "x",
         "stop_token_ids": [2, 3], "max_tokens": 32, "min_tokens": 2, "ignore_eos": True, "n": 3},
        {"use_beam_search": True, "n": 2, "length_penalty": 1.5, "early_stopping": False},
        {"beam_width": 4, "temperature": None, "seed": 18446744073709551615},
        {"temperature": "hot", "n": 0},
    ]
    for i, b in enumerate(sampling):
        put("sampling_json", "sampling_%d" % i, json.dumps(b))
    sep = "\x00\x01"
    frames = [
        {"type": "generate", "id": "a", "prompt": "The capital of France is", "max_tokens": 4,
         "temperature": 0, "logprobs": 2},
        {"type": "generate", "id": "chat-1", "messages": [{"role": "user", "content": "Hi"}], "n": 2, "seed": 3},
        {"type": "generate", "id": "b", "prompt_ids": [1, 2], "beam_width": 2},
        {"type": "cancel", "id": "a"}, {"type": "kv_subscribe"}, {"type": "kv_unsubscribe"},
        {"type": "nope"}, {"id": 5}, [1, 2],
    ]
    for ctx in (1, 2, 5):
        put("ws_protocol", "frames_ctx%d" % ctx, chr(ctx) + sep.join(json.dumps(f) for f in frames))
    put("ws_protocol", "binary_toobig_badjson", "\x01" + sep.join(["\x02abc", "\x03", "{\"type\":", ""]))


# ---- text: tokenizer, chat templates, HTTP ------------------------------------
def text_seeds():
    texts = ["Hello, world! 123 4567", "  leading spaces\n\ttabs and\r\nnewlines",
             "<|im_start|>user\nHi<|im_end|>", "héllo wörld — 日本語 テキスト 😀👍🏽", "\xff\xfe invalid"]
    for i, t in enumerate(texts):
        b = t.encode("utf-8", "surrogateescape") if "\xff" not in t else b"\xff\xfe invalid \xc3"
        for which in range(4):
            put("tokenizer", "text_%d_%d" % (i, which), bytes([which, 1]) + b)
    put("tokenizer", "ids_smollm", bytes([0, 6]) + struct.pack("<8H", 1, 2, 200, 3000, 49152, 65535, 7, 8))
    put("tokenizer", "ids_spm", bytes([3, 4]) + struct.pack("<6H", 3, 250, 251, 252, 10, 31999))
    for name in ("smollm2", "stress", "phi-4-mini-instruct"):
        with open(os.path.join(HERE, "..", "data", "chat", name + ".jinja"), "rb") as f:
            put("chat_template", "template_" + name, b"\x00" + f.read())
    put("chat_template", "template_features",
        "\x00{% set ns = namespace(n=0) %}{% for m in messages if m.role != 'tool' %}"
        "{{ loop.index }}:{{ m.role|upper }}{% if m.content is string %}{{ m.content|trim|tojson }}"
        "{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}{{ tools|length if tools else 0 }}"
        "{% macro f(x, y=2) %}{{ x * y }}{% endmacro %}{{ f(3) }}{{ 'a,b'.split(',')|join('-') }}"
        "{{ raise_exception('stop') if false }}{{ strftime_now('%Y') }}{{ [1,2,3][1:]|list }}")
    put("chat_template", "messages_basic", "\x01" + json.dumps([{"role": "user", "content": "Hi"}]))
    put("chat_template", "messages_system", "\x01" + json.dumps(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
         {"role": "assistant", "content": "A", "reasoning_content": "R"}]))
    reqs = [
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
        "Authorization: Bearer sk-fuzz-key\r\nContent-Length: 17\r\n\r\n{\"prompt\": \"hi\"}\n",
        "GET /v1/ws?api_key=sk-fuzz-key&x=a%20b+c HTTP/1.1\r\nHost: localhost:8000\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nOrigin: http://localhost:8000\r\nSec-WebSocket-Protocol: pagoda, bearer.sk-fuzz-key\r\n\r\n",
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nTrailer: t\r\n\r\n",
        "GET /static/%2e%2e/%2E%2E/etc/passwd?%zz HTTP/1.0\r\nOrigin: https://example.com/\r\n\r\n",
    ]
    for i, r in enumerate(reqs):
        put("http_target", "request_%d" % i, r)


if __name__ == "__main__":
    gguf_seeds()
    safetensors_seeds()
    json_seeds()
    text_seeds()
