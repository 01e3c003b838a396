"""Streaming clients for tools/bench: OpenAI /v1/completions and
/v1/chat/completions over SSE (httpx), and Pagoda's /v1/ws (websockets).

Contract: every client is an async callable `await client.send(req)` that
returns a RequestResult and never raises for a failed request (the error is
recorded in the result). Timestamps are time.perf_counter() seconds; one
"token event" is one streamed chunk carrying new output (an SSE chunk with
non-empty text, or a /v1/ws `token` frame with a token_id), as vLLM's
benchmark counts chunks. All coroutines run on one asyncio event loop.
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from typing import Dict, List, Optional

import httpx

from bench_workload import Request


@dataclasses.dataclass
class RequestResult:
    index: int
    max_tokens: int = 0        # the request's output_len
    success: bool = False
    error: str = ""
    prompt_len: int = 0        # usage.prompt_tokens when reported, else the request's
    output_len: int = 0        # usage.completion_tokens when reported, else token events
    token_events: int = 0      # streamed chunks that carried output
    usage_reported: bool = False
    start: float = 0.0         # perf_counter at send
    ttft: float = 0.0          # seconds from send to the first token event
    latency: float = 0.0       # seconds from send to the end of the stream
    itl: List[float] = dataclasses.field(default_factory=list)  # gaps between token events
    token_ids: List[int] = dataclasses.field(default_factory=list)  # /v1/ws only
    text: str = ""


class _Timer:
    """Records token events of one request."""

    def __init__(self, result: RequestResult):
        self.r = result
        self.last = 0.0

    def event(self):
        now = time.perf_counter()
        if self.r.token_events == 0:
            self.r.ttft = now - self.r.start
        else:
            self.r.itl.append(now - self.last)
        self.last = now
        self.r.token_events += 1

    def finish(self):
        self.r.latency = time.perf_counter() - self.r.start


def _finish_counts(r: RequestResult, req: Request, usage: Optional[dict]):
    if usage:
        r.usage_reported = True
        r.prompt_len = int(usage.get("prompt_tokens") or req.prompt_len)
        r.output_len = int(usage.get("completion_tokens") or 0)
    else:
        r.prompt_len = req.prompt_len
        r.output_len = r.token_events


class OpenAIClient:
    """POSTs streaming requests to an OpenAI-compatible server. api is
    'completions' or 'chat'. extra: fields merged into every body (e.g.
    {"ignore_eos": true}); greedy sets temperature 0."""

    def __init__(self, base_url: str, api: str, model: str, api_key: str = "",
                 extra: Optional[dict] = None, timeout: float = 600.0):
        if api not in ("completions", "chat"):
            raise ValueError(api)
        self.url = base_url.rstrip("/") + ("/v1/completions" if api == "completions"
                                           else "/v1/chat/completions")
        self.api, self.model, self.extra = api, model, dict(extra or {})
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        self.http = httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits)

    async def close(self):
        await self.http.aclose()

    def body(self, req: Request) -> dict:
        b = {"model": self.model, "max_tokens": req.output_len, "stream": True,
             "stream_options": {"include_usage": True}}
        if self.api == "completions":
            b["prompt"] = req.prompt
        else:
            if not isinstance(req.prompt, str):
                raise ValueError("the chat route takes text prompts (--prompt-format text)")
            b["messages"] = [{"role": "user", "content": req.prompt}]
        b.update(self.extra)
        return b

    def _chunk_text(self, chunk: dict) -> str:
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        c = choices[0]
        if self.api == "completions":
            return c.get("text") or ""
        return (c.get("delta") or {}).get("content") or ""

    async def send(self, req: Request) -> RequestResult:
        r = RequestResult(req.index, req.output_len)
        timer, usage, parts = _Timer(r), None, []
        try:
            body = self.body(req)
            r.start = time.perf_counter()
            async with self.http.stream("POST", self.url, json=body) as resp:
                if resp.status_code != 200:
                    r.error = f"HTTP {resp.status_code}: {(await resp.aread())[:300]!r}"
                    timer.finish()
                    return r
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise RuntimeError(f"stream error: {chunk['error']}")
                    text = self._chunk_text(chunk)
                    if text:
                        timer.event()
                        parts.append(text)
                    if chunk.get("usage"):
                        usage = chunk["usage"]
            timer.finish()
            r.text = "".join(parts)
            _finish_counts(r, req, usage)
            r.success = r.token_events > 0
            if not r.success:
                r.error = "no output tokens streamed"
        except Exception as e:  # noqa: BLE001 - a failed request is a result
            timer.finish()
            r.error = f"{type(e).__name__}: {e}"
        return r


class _WsSocket:
    """One /v1/ws connection: a reader task routes frames to per-id queues."""

    def __init__(self, conn, hello: dict):
        self.conn = conn
        self.limit = int(hello.get("max_requests_per_connection", 16))
        self.open = 0
        self.queues: Dict[str, asyncio.Queue] = {}
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self):
        try:
            async for raw in self.conn:
                f = json.loads(raw)
                q = self.queues.get(f.get("id"))
                if q is not None:
                    q.put_nowait(f)
        except Exception as e:  # noqa: BLE001 - the socket died: fail its requests
            for q in self.queues.values():
                q.put_nowait({"type": "error", "code": "socket", "terminal": True,
                              "message": f"{type(e).__name__}: {e}"})
            return
        for q in self.queues.values():
            q.put_nowait({"type": "error", "code": "socket", "terminal": True,
                          "message": "socket closed"})


class WsClient:
    """Sends generate frames over a pool of /v1/ws sockets, opening another
    socket when every open one has max_requests_per_connection requests."""

    _ids = itertools.count()

    def __init__(self, base_url: str, api_key: str = "", extra: Optional[dict] = None):
        self.url = base_url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/v1/ws"
        self.api_key, self.extra = api_key, dict(extra or {})
        self.sockets: List[_WsSocket] = []
        self.lock = asyncio.Lock()

    async def _socket(self) -> _WsSocket:
        from websockets.asyncio.client import connect
        async with self.lock:
            for s in self.sockets:
                if s.open < s.limit:
                    s.open += 1
                    return s
            kw = {"max_size": None, "compression": None, "open_timeout": 60}
            if self.api_key:
                kw["subprotocols"] = [f"bearer.{self.api_key}"]
            conn = await connect(self.url, **kw)
            hello = json.loads(await conn.recv())
            if hello.get("type") != "hello":
                raise RuntimeError(f"first frame is not hello: {hello}")
            s = _WsSocket(conn, hello)
            self.sockets.append(s)
            s.open += 1
            return s

    async def close(self):
        for s in self.sockets:
            await s.conn.close()
            s.reader.cancel()

    async def send(self, req: Request) -> RequestResult:
        r = RequestResult(req.index, req.output_len)
        timer, parts = _Timer(r), []
        if not isinstance(req.prompt, str):
            r.error = "/v1/ws takes text prompts (--prompt-format text)"
            return r
        rid = f"b{next(self._ids)}"
        try:
            s = await self._socket()
        except Exception as e:  # noqa: BLE001
            r.error = f"connect: {type(e).__name__}: {e}"
            return r
        q: asyncio.Queue = asyncio.Queue()
        s.queues[rid] = q
        try:
            frame = {"type": "generate", "id": rid, "prompt": req.prompt,
                     "max_tokens": req.output_len, **self.extra}
            r.start = time.perf_counter()
            await s.conn.send(json.dumps(frame))
            await self._stream(q, r, timer, parts, req)
        except Exception as e:  # noqa: BLE001
            r.error = f"{type(e).__name__}: {e}"
        finally:
            if not r.latency:
                timer.finish()
            s.queues.pop(rid, None)
            s.open -= 1
        return r

    async def _stream(self, q, r, timer, parts, req):
        while True:
            f = await q.get()
            t = f.get("type")
            if t == "token":
                if "token_id" in f:
                    timer.event()
                    r.token_ids.append(int(f["token_id"]))
                parts.append(f.get("text", ""))
            elif t == "done":
                timer.finish()
                r.text = "".join(parts)
                _finish_counts(r, req, f.get("usage"))
                r.success = r.token_events > 0
                if not r.success:
                    r.error = "no output tokens streamed"
                return
            elif t == "error" and f.get("terminal"):
                timer.finish()
                r.error = f"{f.get('code')}: {f.get('message')}"
                return


def make_client(backend: str, base_url: str, model: str, api_key: str = "",
                extra: Optional[dict] = None):
    """backend: 'openai-completions', 'openai-chat' or 'ws'."""
    if backend == "ws":
        return WsClient(base_url, api_key, extra)
    if backend == "openai-completions":
        return OpenAIClient(base_url, "completions", model, api_key, extra)
    if backend == "openai-chat":
        return OpenAIClient(base_url, "chat", model, api_key, extra)
    raise ValueError(f"unknown backend {backend!r}")
