"""`--load-format dummy` through the CLI: `pagoda generate` on random weights of
model/configs/tiny (no weight file, the byte-level stand-in tokenizer) is
deterministic across runs (fixed seed), generates the requested tokens, and
the quantized dummy dtypes run; bad combinations are clear errors."""
import json

from conftest import ROOT, run

TINY = str(ROOT / "model" / "configs" / "tiny")


def generate(pagoda_bin, *extra):
    args = [pagoda_bin, "generate", TINY, "--load-format", "dummy", "--backend", "cpu",
            "--prompt", "Hello, dummy world", "--max-tokens", "12", "--ignore-eos",
            "--kv-cache-memory", str(16 << 20), "--json", *extra]
    return json.loads(run(args).stdout.decode().strip().split("\n")[-1])


def test_dummy_generate_is_deterministic(pagoda_bin):
    a = generate(pagoda_bin)
    b = generate(pagoda_bin)
    assert a == b
    sample = a["samples"][0]
    assert len(sample["token_ids"]) == 12
    assert all(0 <= t < 32000 for t in sample["token_ids"])
    # The stand-in tokenizer: BOS (id 1 in the tiny config) then one id per byte.
    assert a["prompt_ids"] == [1] + list(b"Hello, dummy world")
    assert all(lp <= 0.0 for lp in sample["logprobs"])


def test_dummy_sampling_with_seed_is_deterministic(pagoda_bin):
    extra = ("--temperature", "0.9", "--seed", "5")
    assert generate(pagoda_bin, *extra) == generate(pagoda_bin, *extra)


def test_dummy_quantized_dtypes_run(pagoda_bin):
    for dtype in ("q8_0", "q4_0", "f32", "bf16"):
        out = generate(pagoda_bin, "--dummy-dtype", dtype, "--precision", "quantized")
        assert len(out["samples"][0]["token_ids"]) == 12, dtype
    # bf16 and f32 dummy weights hold the same values: the same greedy output.
    f32 = generate(pagoda_bin, "--dummy-dtype", "f32")
    bf16 = generate(pagoda_bin, "--dummy-dtype", "bf16")
    assert f32["samples"][0]["token_ids"] == bf16["samples"][0]["token_ids"]


def test_dummy_errors_are_clear(pagoda_bin):
    proc = run([pagoda_bin, "generate", TINY, "--load-format", "dummy", "--backend", "cpu",
                "--dummy-dtype", "q4_0", "--precision", "exact", "--prompt", "x"], check=False)
    assert proc.returncode != 0
    assert b"needs the quantized precision" in proc.stderr
    proc = run([pagoda_bin, "generate", TINY, "--load-format", "bogus", "--prompt", "x"], check=False)
    assert proc.returncode != 0
    proc = run([pagoda_bin, "generate", str(ROOT / "no-such-dir"), "--load-format", "dummy",
                "--backend", "cpu", "--prompt", "x"], check=False)
    assert proc.returncode != 0 and b"no-such-dir" in proc.stderr
