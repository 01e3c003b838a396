"""Workloads for tools/bench: the requests (prompt and output lengths, prompts
as text or token ids) and their arrival times.

Contract: everything is deterministic for a given seed, so two servers
benchmarked one after the other get exactly the same requests in the same
order. Pure Python; no I/O.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Iterator, List, Optional, Tuple

# Common short English words. With a BPE tokenizer each " word" is usually a
# single token, so a text prompt of L words has about L tokens (the exact count
# comes back in the server's usage and is what the metrics use).
WORDS = (
    "the of and to in is was for on that with as by at from his her an be this "
    "which or had are not but were they one have their has more new can also "
    "time first after who other two its into all when some would there only "
    "made most over then out many such them these years could than may world "
    "city people used during part well where year three being while about "
    "known since under later between state work both film often use school "
    "through each like before same game season name second music team four "
    "life number place high family large very main water long early river "
    "house light green small open story white power forest stone field paper "
    "bridge table horse cloud train market garden window letter summer winter"
).split()


@dataclasses.dataclass
class Request:
    """One benchmark request. prompt is a str (text) or a list of token ids;
    prompt_len is the intended prompt length in tokens (for text prompts an
    estimate until the server reports usage); output_len is max_tokens."""
    index: int
    prompt: object
    prompt_len: int
    output_len: int


def parse_length(spec: str) -> Tuple[int, int]:
    """'128' -> (128, 128); '64-256' or '64:256' -> (64, 256). Raises
    ValueError on anything else (lengths must be >= 1 and lo <= hi)."""
    text = spec.replace(":", "-")
    parts = text.split("-")
    if len(parts) == 1:
        lo = hi = int(parts[0])
    elif len(parts) == 2:
        lo, hi = int(parts[0]), int(parts[1])
    else:
        raise ValueError(f"bad length {spec!r}: want N or LO-HI")
    if lo < 1 or hi < lo:
        raise ValueError(f"bad length {spec!r}: want 1 <= LO <= HI")
    return lo, hi


# The synthetic chat-like mix: (weight, prompt range, output range). Loosely
# shaped like chat traffic: many short turns, some long contexts, answers of
# a few dozen to a few hundred tokens.
CHAT_MIX = (
    (0.45, (16, 96), (16, 128)),
    (0.35, (96, 512), (64, 256)),
    (0.15, (512, 1536), (128, 384)),
    (0.05, (1536, 3072), (32, 128)),
)


def _chat_lengths(rng: random.Random, max_total: Optional[int]) -> Tuple[int, int]:
    r, acc = rng.random(), 0.0
    for weight, (plo, phi), (olo, ohi) in CHAT_MIX:
        acc += weight
        if r <= acc:
            break
    p, o = rng.randint(plo, phi), rng.randint(olo, ohi)
    if max_total is not None and p + o > max_total:
        o = min(o, max(1, max_total // 2))
        p = max(1, min(p, max_total - o))
    return p, o


def text_prompt(rng: random.Random, n_words: int, prefix: str = "") -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return prefix + " ".join(words)


def id_prompt(rng: random.Random, n: int, id_range: Tuple[int, int]) -> List[int]:
    lo, hi = id_range
    return [rng.randrange(lo, hi) for _ in range(n)]


def make_requests(num: int, input_len: str, output_len: str, dataset: str = "random",
                  prompt_format: str = "ids", id_range: Tuple[int, int] = (256, 8192),
                  seed: int = 0, max_total: Optional[int] = None,
                  unique_prefix: bool = True) -> List[Request]:
    """num requests. dataset 'random': lengths from input_len/output_len
    ('N' fixed or 'LO-HI' uniform); 'chat': the CHAT_MIX (input_len and
    output_len ignored). prompt_format 'ids' (exact token counts; the server
    must accept token-id prompts) or 'text'. unique_prefix starts every text
    prompt with its index so no two share a prefix-cache block by accident
    (token-id prompts are random from their first token)."""
    if dataset not in ("random", "chat"):
        raise ValueError(f"unknown dataset {dataset!r}")
    if prompt_format not in ("ids", "text"):
        raise ValueError(f"unknown prompt format {prompt_format!r}")
    rng = random.Random(seed)
    ilo, ihi = parse_length(input_len)
    olo, ohi = parse_length(output_len)
    out = []
    for i in range(num):
        if dataset == "chat":
            p, o = _chat_lengths(rng, max_total)
        else:
            p, o = rng.randint(ilo, ihi), rng.randint(olo, ohi)
        if prompt_format == "ids":
            prompt = id_prompt(rng, p, id_range)
        else:
            prefix = f"{i} " if unique_prefix else ""
            prompt = text_prompt(rng, max(1, p - (1 if prefix else 0)), prefix)
        out.append(Request(i, prompt, p, o))
    return out


def arrival_delays(num: int, request_rate: float, burstiness: float = 1.0,
                   seed: int = 0) -> Iterator[float]:
    """Gaps in seconds before each request. request_rate inf: all at once (0).
    Otherwise gamma-distributed gaps with mean 1/request_rate; burstiness 1
    is a Poisson process (exponential gaps), as in vLLM's benchmark."""
    rng = random.Random(seed + 7919)
    for _ in range(num):
        if request_rate == float("inf"):
            yield 0.0
        else:
            theta = 1.0 / (request_rate * burstiness)
            yield rng.gammavariate(burstiness, theta)
