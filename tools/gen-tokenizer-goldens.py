#!/usr/bin/env python3
"""Golden token ids and decodes from HF `tokenizers` / `transformers` for the
corpus in tests/data/tokenizer/corpus.jsonl (made by gen-tokenizer-corpus.py).

Run:  /root/gold/bin/python tools/gen-tokenizer-goldens.py   (from the repo root)
Needs: tokenizers, transformers, sentencepiece, protobuf, gguf (no torch).

Tokenizers (one golden-<name>.jsonl each, under tests/data/tokenizer/):
  smollm2   SmolLM2-135M-Instruct loaded by transformers from the GGUF
            (AutoTokenizer.from_pretrained(dir, gguf_file=...)); the model is
            $PAGODA_MODEL or ~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf.
            transformers only imports torch for dtypes there, so a stub module
            stands in for it (nothing of torch is used for the tokenizer).
  llama2    ../shared/tokenizers/llama2-spm/tokenizer.model through
            transformers.LlamaTokenizer (= LlamaTokenizerFast) with its defaults
            (legacy=False, add_prefix_space=True) and add_bos_token=True, as
            Llama-2's tokenizer_config.json sets it.
  llama2-gguf  the same vocabulary written to a GGUF (as llama.cpp does: no
            merges) and loaded by transformers' GGUF path, which ranks the
            derived merges by score rather than by piece id.
  llama3 / qwen2 / smollm / spm / spm-legacy
            small tokenizers this script trains with tokenizers' BpeTrainer on
            deterministic text (gen-tokenizer-corpus.train_lines()) and saves as
            tests/data/tokenizer/<name>/tokenizer.json: byte-level BPE with the
            Llama-3 / Qwen2 Split regex + ByteLevel(use_regex=False), SmolLM2's
            Digits(individual) + ByteLevel(use_regex=True), and SentencePiece-
            style BPE with byte fallback (Metaspace, or the legacy Prepend/Replace
            normalizer). Each has added tokens with various flags.

Golden line i belongs to corpus line i * header.stride:
  {"ids": encode(text, add_special_tokens=False),
   "ids_special": encode(text, add_special_tokens=True)   only when it is not
                  header.prefix + ids + header.suffix,
   "decode": decode(ids)                                   only when != text,
   "decode_skip": decode(ids_special, skip_special_tokens=True)  only when != decode}
The first line of each file is a header {"name", "prefix", "suffix", ...}.
"""
import importlib.util
import json
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
sys.path.insert(0, os.path.join(ROOT, "tools"))
_spec = importlib.util.spec_from_file_location("corpus", os.path.join(ROOT, "tools", "gen-tokenizer-corpus.py"))
corpus_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus_mod)

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, processors, trainers  # noqa: E402

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def load_corpus():
    with open(os.path.join(DATA, "corpus.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ---------------------------------------------------------------- references

def smollm2_from_gguf():
    path = os.environ.get("PAGODA_MODEL",
                          os.path.expanduser("~/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    return from_gguf(path)


def llama2_model_proto():
    import sentencepiece.sentencepiece_model_pb2 as pb
    proto = pb.ModelProto()
    with open(os.path.join(ROOT, "..", "shared", "tokenizers", "llama2-spm", "tokenizer.model"), "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def llama2_from_gguf(tmp):
    """Llama 2's vocabulary written as a GGUF (tokens, scores, types, special
    ids; no merges, as llama.cpp writes SentencePiece vocabularies), loaded by
    transformers' GGUF path. tests/tokenizer_test.cpp writes the same GGUF."""
    import gguf
    proto = llama2_model_proto()
    path = os.path.join(tmp, "llama2-vocab.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([p.piece for p in proto.pieces])
    w.add_token_scores([p.score for p in proto.pieces])
    w.add_token_types([p.type for p in proto.pieces])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    # transformers builds a model config from the file too; give it the minimum.
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(8)
    w.add_head_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return from_gguf(path)


def from_gguf(path):
    import transformers  # noqa: F401  (imported first: is_torch_available() stays False)
    import transformers.modeling_gguf_pytorch_utils as mgu

    class _TorchStub(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (), {})

    sys.modules.setdefault("torch", _TorchStub("torch"))
    mgu.is_torch_available = lambda: True
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    return tok


def llama2_from_model():
    from transformers import LlamaTokenizer
    d = os.path.join(ROOT, "..", "shared", "tokenizers", "llama2-spm")
    tok = LlamaTokenizer.from_pretrained(d, add_bos_token=True)
    assert tok.legacy is False
    return tok


class HfTransformers:
    """encode/decode through a transformers tokenizer (what users get)."""

    def __init__(self, tok):
        self.tok = tok

    def encode(self, text, special):
        return self.tok(text, add_special_tokens=special)["input_ids"]

    def decode(self, ids, skip):
        text = self.tok.decode(ids, skip_special_tokens=skip)
        backend = self.tok.backend_tokenizer.decode(ids, skip_special_tokens=skip)
        assert text == backend, (text, backend)
        return text


class HfTokenizers:
    def __init__(self, tok):
        self.tok = tok

    def encode(self, text, special):
        return self.tok.encode(text, add_special_tokens=special).ids

    def decode(self, ids, skip):
        return self.tok.decode(ids, skip_special_tokens=skip)


# ---------------------------------------------------------------- training

def train_byte_level(name, split, specials, added):
    tok = Tokenizer(models.BPE())
    if split is None:   # SmolLM2's own tokenizer.json shape
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, show_progress=False,
                                  special_tokens=[t.content for t in specials],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_mod.train_lines(), trainer)
    tok.add_special_tokens(specials)
    tok.add_tokens(added)
    return tok


def train_spm(name):
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    base.train_from_iterator(corpus_mod.train_lines(), trainer)
    data = json.loads(base.to_str())
    # Re-number: specials, then the 256 byte-fallback tokens, then the rest.
    old = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for piece in ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]:
        vocab[piece] = len(vocab)
    for piece, _ in old:
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in data["model"]["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ["<unk>", "<s>", "</s>"]])
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    if name == "spm":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
        tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                         decoders.Metaspace(replacement="\u2581", prepend_scheme="always")])
    else:  # the legacy Llama tokenizer.json shape
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return tok


def trained(name):
    S = lambda c, **kw: AddedToken(c, special=True, normalized=False, **kw)  # noqa: E731
    if name == "llama3":
        specials = [S("<|begin_of_text|>"), S("<|end_of_text|>"), S("<|eot_id|>"),
                    S("<|start_header_id|>"), S("<|end_header_id|>"), S("<|im_start|>"),
                    S("<\uff5cbegin\u2581of\u2581sentence\uff5c>"), S("<mask>", lstrip=True)]
        added = [AddedToken("<think>"), AddedToken("</think>"), AddedToken("hello world")]
        tok = train_byte_level(name, LLAMA3_SPLIT, specials, added)
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
        data = json.loads(tok.to_str())
        data["model"]["ignore_merges"] = True   # as Llama-3's tokenizer.json
        return Tokenizer.from_str(json.dumps(data))
    if name == "qwen2":
        specials = [S("<|endoftext|>"), S("<|im_start|>"), S("<|im_end|>"), S("<|fim_prefix|>"),
                    S("<mask>", rstrip=True, single_word=True)]
        added = [AddedToken("<tool_call>", normalized=False), AddedToken("</s>", single_word=True)]
        return train_byte_level(name, QWEN2_SPLIT, specials, added)
    if name == "smollm":
        specials = [S("<|endoftext|>"), S("<|im_start|>"), S("<|im_end|>"), S("<repo_name>")]
        return train_byte_level(name, None, specials, [])
    return train_spm(name)


# ---------------------------------------------------------------- goldens

def write_goldens(name, ref, lines, prefix, suffix, extra=None, stride=1):
    lines = lines[::stride]
    out = []
    mismatched_affix = 0
    for text in lines:
        ids = ref.encode(text, False)
        ids_special = ref.encode(text, True)
        rec = {"ids": ids}
        if ids_special != prefix + ids + suffix:
            rec["ids_special"] = ids_special
            mismatched_affix += 1
        dec = ref.decode(ids, False)
        if dec != text:
            rec["decode"] = dec
        dec_skip = ref.decode(ids_special, True)
        if dec_skip != dec:
            rec["decode_skip"] = dec_skip
        out.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
    header = {"name": name, "prefix": prefix, "suffix": suffix, "lines": len(lines), "stride": stride}
    header.update(extra or {})
    path = os.path.join(DATA, f"golden-{name}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=False) + "\n")
        f.write("\n".join(out) + "\n")
    n_decode = sum('"decode"' in o for o in out)
    print(f"{name}: {len(lines)} lines, {os.path.getsize(path)} bytes, {n_decode} decodes != text, "
          f"{mismatched_affix} with explicit ids_special")


def smollm2_digit_split_divergence(tok, lines):
    """How often SmolLM2's own tokenizer.json pre-tokenizer (Digits + ByteLevel)
    would tokenize differently from what transformers builds from the GGUF."""
    data = json.loads(tok.backend_tokenizer.to_str())
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    orig = Tokenizer.from_str(json.dumps(data))
    return sum(orig.encode(t, add_special_tokens=False).ids != tok(t, add_special_tokens=False)["input_ids"]
               for t in lines)


PRETOKENIZER_CASES = [
    "Hello world", "  Hello   world  ", "I'm don't WE'RE it'S 'll", "x'\u017fa", "a \t\n \n  b",
    "12345 1234567", "(hello) [x]!!\n\nfoo", "\tword  \u00a0x", "a\u3000\u3000b",
    "e\u0301t\u00e9 \u0663\u0664\u0665 \u00b2\u00b3", "\U0001f917 hi\U0001f917", "x  \n", "\r\n\r\n x",
    "foo.bar(baz)\n    return", "a\x1cb", "  \n", "a1b22 \u0663\u0664 \u00bdx", "",
]


def write_pretokenizer_cases():
    """HF pre-tokenizer splits of hand-picked strings (tests/pretokenizer_test.cpp)."""
    splits = {"gpt2": pre_tokenizers.Split(Regex(GPT2_SPLIT), behavior="isolated"),
              "llama3": pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
              "qwen2": pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
              "digits": pre_tokenizers.Digits(individual_digits=False),
              "digits_individual": pre_tokenizers.Digits(individual_digits=True)}
    path = os.path.join(DATA, "pretokenizer-cases.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for name, pt in splits.items():
            for text in PRETOKENIZER_CASES:
                pieces = [piece for piece, _ in pt.pre_tokenize_str(text)]
                f.write(json.dumps({"rule": name, "text": text, "pieces": pieces}, ensure_ascii=False) + "\n")
    print(f"pretokenizer cases: {os.path.getsize(path)} bytes")


def main():
    lines = load_corpus()
    only = set(sys.argv[1:])
    want = lambda n: not only or n in only  # noqa: E731
    if want("pretokenizer"):
        write_pretokenizer_cases()

    if want("smollm2"):
        tok = smollm2_from_gguf()
        assert tok.backend_tokenizer.pre_tokenizer.__class__.__name__ == "ByteLevel"
        div = smollm2_digit_split_divergence(tok, lines)
        print(f"smollm2: {div} corpus lines differ between the GGUF build and Digits+ByteLevel")
        write_goldens("smollm2", HfTransformers(tok), lines, [], [],
                      {"source": "transformers AutoTokenizer gguf_file", "digits_divergence": div})
    if want("llama2-gguf"):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            tok = llama2_from_gguf(tmp)
            write_goldens("llama2-gguf", HfTransformers(tok), lines, [tok.bos_token_id], [],
                          {"source": "transformers AutoTokenizer gguf_file (Llama 2 vocabulary)"}, 2)
    if want("llama2"):
        tok = llama2_from_model()
        write_goldens("llama2", HfTransformers(tok), lines, [tok.bos_token_id], [],
                      {"source": "transformers LlamaTokenizer legacy=False add_bos_token=True"})
    for name in ["llama3", "qwen2", "smollm", "spm", "spm-legacy"]:
        if not want(name):
            continue
        tok = trained(name)
        d = os.path.join(DATA, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        prefix = tok.encode("", add_special_tokens=True).ids
        # smollm and spm-legacy share most code paths with others: every 3rd line keeps data small.
        stride = {"smollm": 3, "spm-legacy": 3, "spm": 2}.get(name, 1)
        write_goldens(name, HfTokenizers(tok), lines, prefix, [], {"source": "tokenizers (trained)"}, stride)


if __name__ == "__main__":
    main()
