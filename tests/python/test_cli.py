"""The `pagoda` CLI on the real default model: inspect, tokenize and
chat-template against the independent goldens in tests/data (HF tokenizers and
jinja2 outputs), plus clear errors for broken inputs."""
import json

from conftest import DATA, run


def test_inspect_reports_smollm2_config(pagoda_bin, model_path):
    info = json.loads(run([pagoda_bin, "inspect", model_path]).stdout)
    assert info["format"] == "gguf"
    assert info["architecture"] == "llama"
    assert (info["num_layers"], info["hidden_size"]) == (30, 576)
    assert (info["num_heads"], info["num_kv_heads"]) == (9, 3)
    assert info["vocab_size"] == 49152
    assert info["tensor_count"] == sum(info["tensors_by_dtype"].values()) == 272


def test_tokenize_jsonl_matches_hf(pagoda_bin, model_path):
    # split on "\n" only: JSON lines may hold U+2028 and friends, which
    # str.splitlines() would also split on.
    corpus = (DATA / "tokenizer" / "corpus.jsonl").read_text(encoding="utf-8").split("\n")
    golden = (DATA / "tokenizer" / "golden-smollm2.jsonl").read_text().split("\n")
    header = json.loads(golden[0])
    expected = [json.loads(line)["ids"] for line in golden[1:] if line]
    lines = corpus[: header["lines"]][:400]
    out = run([pagoda_bin, "tokenize", model_path, "--jsonl", "--no-special"],
              stdin="\n".join(lines) + "\n").stdout.decode().split("\n")[:-1]
    # Blank input lines are skipped by --jsonl only when literally empty; corpus
    # lines are JSON strings, never empty.
    assert len(out) == len(lines)
    mismatches = [i for i, row in enumerate(out) if json.loads(row) != expected[i]]
    assert not mismatches, f"{len(mismatches)} lines differ, first: {lines[mismatches[0]]}"


def test_tokenize_plain_stdin(pagoda_bin, model_path):
    ids = json.loads(run([pagoda_bin, "tokenize", model_path], stdin="Hello world").stdout)
    assert ids == [19556, 905]


def test_chat_template_matches_jinja2(pagoda_bin, model_path):
    cases = json.loads((DATA / "chat" / "smollm2.cases.json").read_text(encoding="utf-8"))
    checked = 0
    for case in cases["cases"]:
        if case.get("tools") or case.get("extra_context") or "expected" not in case:
            continue
        args = [pagoda_bin, "chat-template", model_path]
        if not case["add_generation_prompt"]:
            args.append("--no-generation-prompt")
        proc = run(args, stdin=json.dumps(case["messages"]), check=False)
        assert proc.returncode == 0, f"{case['name']}: {proc.stderr.decode()}"
        assert proc.stdout.decode() == case["expected"], case["name"]
        checked += 1
    assert checked >= 10


def test_broken_model_file_is_a_clear_error(pagoda_bin, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    for cmd in ("inspect", "tokenize", "chat-template"):
        proc = run([pagoda_bin, cmd, str(bad)], stdin="[]", check=False)
        assert proc.returncode == 1, cmd
        assert "broken.gguf" in proc.stderr.decode(), proc.stderr.decode()


def test_missing_model_is_a_clear_error(pagoda_bin, tmp_path):
    proc = run([pagoda_bin, "inspect", str(tmp_path / "nope.gguf")], check=False)
    assert proc.returncode == 1
    assert "nope.gguf" in proc.stderr.decode()


def test_bad_chat_json_is_a_clear_error(pagoda_bin, model_path):
    proc = run([pagoda_bin, "chat-template", model_path], stdin="{not json", check=False)
    assert proc.returncode == 1
    assert "stdin" in proc.stderr.decode()


def test_generate_greedy_matches_transformers(pagoda_bin, model_path, tmp_path):
    """`pagoda generate --temperature 0` on the 8 golden prompts, all in one
    engine run (--prompts: they share steps), gives the same prompt ids and the
    same 32 greedy tokens as HF transformers (golden from
    tools/gen-logits-goldens.py, which ignores EOS; so does this run)."""
    golden = json.loads((DATA / "logits" / "smollm2.json").read_text(encoding="utf-8"))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": r["prompt"]}) + "\n"
                               for r in golden["prompts"]), encoding="utf-8")
    lines = run([pagoda_bin, "generate", model_path, "--prompts", str(prompts),
                 "--max-tokens", "32", "--temperature", "0", "--ignore-eos",
                 "--json"]).stdout.decode().splitlines()
    assert len(lines) == len(golden["prompts"])
    for line, rec in zip(lines, golden["prompts"]):
        out = json.loads(line)
        sample = out["samples"][0]
        assert out["prompt_ids"] == rec["ids"], rec["prompt"]
        assert sample["token_ids"] == rec["greedy"], rec["prompt"]
        assert sample["finish_reason"] == "length"
        # The streamed text leaves out special tokens; compare where there are none
        # (SmolLM2's special tokens are ids 0..16).
        if all(t > 16 for t in rec["greedy"]):
            assert sample["text"] == rec["greedy_text"], rec["prompt"]


def test_generate_single_prompt_stops_at_eos(pagoda_bin, model_path):
    out = json.loads(run([pagoda_bin, "generate", model_path, "--prompt",
                          "The capital of France is", "--max-tokens", "64",
                          "--temperature", "0", "--json"]).stdout)
    sample = out["samples"][0]
    assert sample["finish_reason"] == "stop"
    assert sample["token_ids"][-1] == 2  # <|im_end|>, SmolLM2's eos
    assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": len(sample["token_ids"])}


def test_generate_parallel_samples_are_seeded(pagoda_bin, model_path):
    args = [pagoda_bin, "generate", model_path, "--prompt", "Once upon a time",
            "--n", "3", "--temperature", "1.0", "--seed", "7", "--max-tokens", "12",
            "--ignore-eos", "--json"]
    first = json.loads(run(args).stdout)
    again = json.loads(run(args).stdout)
    assert len(first["samples"]) == 3
    assert first == again  # same seed, same samples
    assert all(len(s["token_ids"]) == 12 for s in first["samples"])


def test_generate_rejects_bad_backend(pagoda_bin, model_path):
    proc = run([pagoda_bin, "generate", model_path, "--prompt", "x", "--backend", "tpu"],
               check=False)
    assert proc.returncode == 1
    assert "--backend" in proc.stderr.decode()


def test_generate_rejects_bad_prompts_file(pagoda_bin, model_path, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": 3}\n')
    proc = run([pagoda_bin, "generate", model_path, "--prompts", str(bad)], check=False)
    assert proc.returncode == 1
    assert "bad.jsonl:1" in proc.stderr.decode()
