#!/usr/bin/env python3
"""A Gemma-style GGUF vocabulary and its transformers goldens (issue 20).

Gemma's own tokenizer.model cannot be downloaded here, so this script makes one
with the same shape and converts it the way a real Gemma GGUF is made:

1. sentencepiece's trainer (BPE, as Gemma) on gen-tokenizer-corpus.train_lines()
   with Gemma's normalizer settings: no dummy prefix, no whitespace folding,
   identity normalization, byte fallback, split digits, whitespace-only pieces;
   Gemma's id layout (<pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4,
   [multimodal] 5), <start_of_turn>/<end_of_turn> and Gemma-like user-defined
   pieces (newline runs, runs of U+2581, a tab, HTML tags).
2. transformers' GemmaTokenizer from that tokenizer.model, saved as an HF
   directory with a tokenizer_config.json carrying added_tokens_decoder as the
   published Gemma repos do (<start_of_turn>/<end_of_turn> special, the
   whitespace and HTML pieces not special; transformers 5 no longer writes it),
   add_bos_token true, and a Gemma 2 config.json.
3. llama.cpp's convert_hf_to_gguf.py --vocab-only on that directory: the GGUF
   holds tokenizer.ggml.* exactly as for a real Gemma 2 model (scores, token
   types CONTROL / USER_DEFINED with the U+2581 runs written as spaces,
   add_space_prefix false, no merges). Written to
   tests/data/tokenizer/gemma/vocab.gguf (about 90 kB).

Goldens (the format of gen-tokenizer-goldens.py):
  golden-gemma-gguf.jsonl       every 2nd corpus line, through transformers'
                                GGUF path (AutoTokenizer.from_pretrained(dir,
                                gguf_file=...)), which is what Pagoda follows;
  golden-gemma-gguf-chat.jsonl  Gemma chat-turn and whitespace strings (each
                                record carries its "text");
  golden-gemma-hf.jsonl         every 2nd corpus line through the original
                                GemmaTokenizer, whose tokenizer.json and
                                tokenizer_config.json are copied to
                                tests/data/tokenizer/gemma/ (an HF directory).
The header records how often the original GemmaTokenizer (from tokenizer.model)
and sentencepiece itself agree with the GGUF path on the same lines.

Run (from the repo root; torch is not needed):
    /work/wt/gold/bin/python tools/gen-gemma-tokenizer.py \
        --llama-cpp /work/wt/gold-src/llama_cpp_python-0.3.36/vendor/llama.cpp
"""
import argparse
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "tokenizer"


def load_module(name, file):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


goldens = load_module("tokgoldens", "gen-tokenizer-goldens.py")

SP = "\u2581"
SPECIAL_TURNS = ["<start_of_turn>", "<end_of_turn>"]
USER_DEFINED = SPECIAL_TURNS + ["\n", "\n\n", "\n\n\n", SP * 2, SP * 3, SP * 4, SP * 8, "\t", "\t\t",
                                "<table>", "</table>", "<b>", "</b>"]

CHAT_TEXTS = [
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n",
    "  two leading spaces", "a  b   c    d     e        f         g", "\t\tx\t y \t\n\n\n\nz",
    "<table><b>bold</b></table>", " <start_of_turn> spaced <end_of_turn> ", "<mask> and [multimodal]",
    "<eos><pad><unk>", "12345 6.789 -0", "line\n\n\n\n\nbreaks", "trailing   ", "  ", " ", "",
    "caf\u00e9 \u00fcber \u65e5\u672c\u8a9e \U0001f600 \u0000\u0007 end",
]


def train(tmp):
    import sentencepiece as spm
    corpus = load_module("corpus", "gen-tokenizer-corpus.py")
    text = tmp / "train.txt"
    text.write_text("".join(line.replace("\n", " ") + "\n" for line in corpus.train_lines()), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp / "gemma"), model_type="bpe", vocab_size=3000,
        byte_fallback=True, split_digits=True, add_dummy_prefix=False, remove_extra_whitespaces=False,
        normalization_rule_name="identity", allow_whitespace_only_pieces=True, character_coverage=1.0,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
        unk_piece="<unk>", control_symbols=["<mask>", "[multimodal]"], user_defined_symbols=USER_DEFINED,
        num_threads=1, minloglevel=2)
    return tmp / "gemma.model"


def hf_dir(model_file, d):
    from transformers import GemmaTokenizer
    import sentencepiece as spm
    d.mkdir()
    shutil.copy(model_file, d / "tokenizer.model")
    tok = GemmaTokenizer.from_pretrained(str(d), add_bos_token=True, additional_special_tokens=SPECIAL_TURNS)
    tok.save_pretrained(str(d))
    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    decoder = {}
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i) or sp.id_to_piece(i) in USER_DEFINED:
            piece = sp.id_to_piece(i)
            special = sp.is_control(i) or sp.is_unknown(i) or piece in SPECIAL_TURNS
            decoder[str(i)] = {"content": piece, "lstrip": False, "normalized": False, "rstrip": False,
                               "single_word": False, "special": special}
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["added_tokens_decoder"] = decoder
    cfg["add_bos_token"] = True
    cfg["add_eos_token"] = False
    (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1))
    config = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "vocab_size": sp.get_piece_size(),
              "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
              "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
              "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0, "sliding_window": 128,
              "query_pre_attn_scalar": 32, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}
    (d / "config.json").write_text(json.dumps(config, indent=1))
    return tok, sp


CONVERT = r"""
import sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/gguf-py"]
import convert_hf_to_gguf
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
convert_hf_to_gguf.main()
"""


def convert(llama_cpp, d, out):
    subprocess.run([sys.executable, "-c", CONVERT, str(llama_cpp), str(d), "--vocab-only", "--outfile", str(out)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def write_chat_goldens(ref, prefix):
    out = []
    for text in CHAT_TEXTS:
        ids = ref.encode(text, False)
        special = ref.encode(text, True)
        rec = {"text": text, "ids": ids}
        if special != prefix + ids:
            rec["ids_special"] = special
        dec = ref.decode(ids, False)
        if dec != text:
            rec["decode"] = dec
        skip = ref.decode(special, True)
        if skip != dec:
            rec["decode_skip"] = skip
        out.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
    header = {"name": "gemma-gguf-chat", "prefix": prefix, "suffix": [], "lines": len(out), "stride": 1}
    path = DATA / "golden-gemma-gguf-chat.jsonl"
    path.write_text(json.dumps(header) + "\n" + "\n".join(out) + "\n", encoding="utf-8")
    for text, line in zip(CHAT_TEXTS, out):
        print(f"  {text!r}: {json.loads(line)['ids']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, type=pathlib.Path)
    args = ap.parse_args()
    lines = goldens.load_corpus()[::2]
    with tempfile.TemporaryDirectory() as t:
        tmp = pathlib.Path(t)
        model_file = train(tmp)
        original, sp = hf_dir(model_file, tmp / "hf")
        out_dir = DATA / "gemma"
        out_dir.mkdir(exist_ok=True)
        gguf_path = out_dir / "vocab.gguf"
        convert(args.llama_cpp, tmp / "hf", gguf_path)
        tok = goldens.from_gguf(str(gguf_path))
        hf_tmp = DATA / "gemma" / ".hf"
        shutil.rmtree(hf_tmp, ignore_errors=True)
        shutil.copytree(tmp / "hf", hf_tmp)
    ref = goldens.HfTransformers(tok)
    agree_hf = sum(original(x, add_special_tokens=False)["input_ids"] == ref.encode(x, False) for x in lines)
    agree_spm = sum(sp.encode(x) == ref.encode(x, False) for x in lines)
    print(f"gemma-gguf: original GemmaTokenizer agrees on {agree_hf}/{len(lines)} lines, "
          f"sentencepiece on {agree_spm}/{len(lines)}")
    # The HF directory as transformers saves it (tokenizer.json with Gemma's
    # Replace normalizer and Split(" ") pre-tokenizer), for Tokenizer::from_hf_dir.
    (DATA / "gemma" / "tokenizer.json").write_bytes((hf_tmp / "tokenizer.json").read_bytes())
    cfg = json.loads((hf_tmp / "tokenizer_config.json").read_text())
    cfg.pop("vocab_file", None)  # a temporary path
    (DATA / "gemma" / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1))
    prefix = [tok.bos_token_id]
    goldens.DATA = str(DATA)
    goldens.write_goldens("gemma-gguf", ref, goldens.load_corpus(), prefix, [],
                          {"source": "transformers AutoTokenizer gguf_file (Gemma-style vocabulary, "
                                     "convert_hf_to_gguf --vocab-only)",
                           "agree_original_gemma_tokenizer": agree_hf, "agree_sentencepiece": agree_spm}, 2)
    write_chat_goldens(ref, prefix)
    goldens.write_goldens("gemma-hf", goldens.HfTransformers(original), goldens.load_corpus(),
                          original("", add_special_tokens=True)["input_ids"], [],
                          {"source": "transformers GemmaTokenizer from the tokenizer.model, saved as "
                                     "tests/data/tokenizer/gemma/tokenizer.json"}, 2)
    shutil.rmtree(hf_tmp)


if __name__ == "__main__":
    main()
