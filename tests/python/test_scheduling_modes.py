"""`--no-async-scheduling` (lockstep) and the default (one step ahead) give the
same tokens, through `pagoda generate` on the real model: greedy batch of
several prompts, and seeded sampling with n = 2."""
import json
import subprocess


def generate(pagoda_bin, model_path, tmp_path, extra):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in
                               ["The capital of France is", "Once upon a time", "1, 2, 3,"]))
    args = [pagoda_bin, "generate", model_path, "--prompts", str(prompts), "--json",
            "--max-tokens", "24", "--backend", "cpu", "--precision", "quantized"] + extra
    proc = subprocess.run(args, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return [[s["token_ids"] for s in json.loads(line)["samples"]]
            for line in proc.stdout.decode().splitlines() if line.strip()]


def test_lockstep_equals_scheduling_ahead(pagoda_bin, model_path, tmp_path):
    for extra in (["--temperature", "0"], ["--temperature", "1", "--seed", "7", "--n", "2"]):
        ahead = generate(pagoda_bin, model_path, tmp_path, extra)
        lockstep = generate(pagoda_bin, model_path, tmp_path, extra + ["--no-async-scheduling"])
        assert len(ahead) == 3 and all(len(t) > 0 for r in ahead for t in r)
        assert ahead == lockstep, extra
