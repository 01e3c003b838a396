#!/usr/bin/env python3
"""Issue 20's serving check: a running `pagoda serve FILE` answers the prompts
of tests/data/logits/smollm2.json (sent as token ids to /v1/completions,
temperature 0, ignore_eos, 32 tokens) with transformers' greedy continuation on
the same file (tests/data/logits/smollm2-variants.json, made by
tools/gen-variant-goldens.py).

Prints, per prompt, how many leading generated tokens equal the golden ones
(compared by text: the response's logprobs.tokens against the server's own
/detokenize of each golden id; the EOS ids transformers generated are kept,
ignore_eos only stops the server from ending there), and the totals (of 8
prompts and of 256 tokens). Standard library only.

Run: pagoda serve FILE --port 18420 &   then
     python3 tools/serve-variant-check.py --url http://127.0.0.1:18420 --variant Q4_K_M
"""
import argparse
import json
import pathlib
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOGITS = ROOT / "tests" / "data" / "logits"


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:18420")
    ap.add_argument("--variant", required=True, help="Q4_1, Q4_K_M or IQ4_XS")
    args = ap.parse_args()
    prompts = json.loads((LOGITS / "smollm2.json").read_text())["prompts"]
    golden = json.loads((LOGITS / "smollm2-variants.json").read_text())["files"][args.variant]["greedy"]
    equal = tokens = 0
    for p, want in zip(prompts, golden):
        r = post(args.url + "/v1/completions", {"prompt": p["ids"], "max_tokens": len(want), "ignore_eos": True,
                                                "temperature": 0, "logprobs": 1})
        got = r["choices"][0]["logprobs"]["tokens"]  # the text of each generated token
        n = 0
        while n < min(len(got), len(want)) and got[n] == post(args.url + "/detokenize", {"tokens": [want[n]]})["prompt"]:
            n += 1
        equal += n == len(want)
        tokens += n
        print(f"{p['prompt'][:40]!r}: {'equal' if n == len(want) else 'differs'}, golden prefix {n}/{len(want)}")
    print(f"{args.variant}: {equal}/{len(prompts)} completions equal to transformers', "
          f"golden prefix {tokens}/{sum(map(len, golden))} tokens")


if __name__ == "__main__":
    main()
