"""Scale-out on one machine (docs/scaling.md): `pagoda engine` nodes on
loopback behind one `pagoda serve --engines` front end. Requests spread over
the nodes, repeated prompts stay on the node that caches them (prefix hits in
that node's /metrics), a node killed mid-stream ends its streaming requests
with `engine_unavailable` while a request of it that streamed nothing is
retried elsewhere, a returning node is used again, a killed front end frees
its requests' blocks on the nodes, and every node's blocks are back at the
end. Every wait is bounded."""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import (Server, Ws, _pump, kv_blocks_used, metrics, serve_flags, small_cpu_args,
                      stop_server, wait_for)

START_TIMEOUT_S = 120.0
NODE_LINE = re.compile(r"pagoda: engine node on ([0-9.]+):(\d+)")
SERVE_LINE = re.compile(r"pagoda: serving .* on http://([0-9.]+):(\d+)")
# Over three blocks of 16 tokens: prefix caching can reuse them.
LONG = ("In the beginning of the story the old sailor told the children about the sea, "
        "the storms, the whales and the islands he had seen in forty years of travel")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, log_path, line=SERVE_LINE):
    """Starts a pagoda process, waits for its serving line -> (Server, stdout lines)."""
    log = open(log_path, "a")
    log.write("$ " + " ".join(map(str, args)) + "\n")
    log.flush()
    env = dict(os.environ)
    env.pop("PAGODA_API_KEY", None)
    proc = subprocess.Popen(list(map(str, args)), stdout=subprocess.PIPE, stderr=log, env=env)
    lines, found = [], threading.Event()
    threading.Thread(target=_pump, args=(proc.stdout, lines, found, log), daemon=True).start()
    found.wait(START_TIMEOUT_S)
    match = next((m for m in map(SERVE_LINE.search, lines) if m), None)
    if match is None:
        proc.kill()
        proc.wait()
        raise AssertionError(f"no serving line; log:\n{pathlib.Path(log_path).read_text()[-3000:]}")
    return Server(proc, match.group(1), int(match.group(2)), log_path, "", "quantized"), lines


class Node:
    def __init__(self, pagoda_bin, model_path, log_dir, name, extra=()):
        self.listen = free_port()
        cpu = small_cpu_args(serve_flags(pagoda_bin))
        for flag in extra[::2]:  # extra flags replace the small CPU settings
            if flag in cpu:
                del cpu[cpu.index(flag):cpu.index(flag) + 2]
        self.args = [pagoda_bin, "engine", model_path, "--listen", f"127.0.0.1:{self.listen}",
                     "--host", "127.0.0.1", "--port", "0"] + cpu + list(extra)
        self.log_path = log_dir / f"{name}.log"
        self.start()

    def start(self):
        self.http, _ = launch(self.args, self.log_path)

    @property
    def addr(self):
        return f"127.0.0.1:{self.listen}"

    def stats(self):
        return metrics(self.http)


def front_end(pagoda_bin, model_path, nodes, log_path, extra=()):
    args = [pagoda_bin, "serve", model_path, "--engines", ",".join(n.addr for n in nodes),
            "--host", "127.0.0.1", "--port", "0", "--engine-connect-timeout", "3"] + list(extra)
    srv, _ = launch(args, log_path)
    wait_for(lambda: srv.request("GET", "/health", timeout=5)[0] == 200, 30, what="front end /health")
    return srv


def complete(srv, prompt, max_tokens=8, **extra):
    status, _, body = srv.request("POST", "/v1/completions",
                                  {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra},
                                  timeout=120)
    assert status == 200, body[:500]
    return json.loads(body)


def node_metric(srv, name, node):
    """A per-node metric of the front end's /metrics (label node="HOST:PORT")."""
    values = metrics(srv)
    keys = [k for k in values if k.startswith(name + "{") and f'node="{node.addr}"' in k]
    assert len(keys) == 1, f"{name} for {node.addr}: {keys}"
    return values[keys[0]]


def wait_idle(node):
    wait_for(lambda: kv_blocks_used(node.http) == 0 and node.stats().get("pagoda:num_requests_running", 0) == 0,
             30, what=f"node {node.addr} idle with every KV block back")


@pytest.fixture(scope="module")
def cluster(pagoda_bin, model_path, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("scale-out")
    nodes = [Node(pagoda_bin, model_path, log_dir, f"node{i}") for i in range(2)]
    srv = front_end(pagoda_bin, model_path, nodes, log_dir / "front.log")
    yield srv, nodes
    stop_server(srv)
    for n in nodes:
        wait_idle(n)  # after everything, every node's blocks are back
        stop_server(n.http)


def test_front_end_answers_as_a_node(cluster):
    srv, nodes = cluster
    a = complete(srv, "Once upon a time there lived", 16, logprobs=2)
    b = complete(nodes[0].http, "Once upon a time there lived", 16, logprobs=2)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert a["choices"][0]["logprobs"]["tokens"] == b["choices"][0]["logprobs"]["tokens"]
    beam = {"use_beam_search": True, "beam_width": 3, "n": 2}
    a = complete(srv, "The best thing about", 8, **beam)
    b = complete(nodes[1].http, "The best thing about", 8, **beam)
    assert [c["text"] for c in a["choices"]] == [c["text"] for c in b["choices"]]
    stop = complete(srv, "Count: one, two, three,", 24, stop=[" six"])
    assert " six" not in stop["choices"][0]["text"] and stop["choices"][0]["finish_reason"] in ("stop", "length")
    # The front end measures its own latency (the hop to the node included).
    m = metrics(srv)
    assert m.get("pagoda:time_to_first_token_seconds_count", 0) >= 3, {k: v for k, v in m.items() if "token_" in k}
    assert m.get("pagoda:inter_token_latency_seconds_count", 0) >= 15
    assert m["pagoda:time_to_first_token_seconds_sum"] > 0
    # The queue time is the nodes' (summed): each request admitted once, on one node.
    deadline = time.monotonic() + 15
    while metrics(srv).get("pagoda:request_queue_time_seconds_count", 0) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert metrics(srv).get("pagoda:request_queue_time_seconds_count", 0) >= 3


def test_ws_generate_n2_and_cancel(cluster):
    srv, _ = cluster
    with Ws(srv) as ws:
        ws.generate("a", prompt="Tell me a story", max_tokens=12, n=2, seed=7, temperature=0.8)
        ws.generate("b", prompt="Tell me a long story", max_tokens=400, ignore_eos=True)
        first = ws.recv()
        while not (first.get("id") == "b" and first["type"] == "token"):
            first = ws.recv()
        ws.send({"type": "cancel", "id": "b"})
        out = ws.run(["a", "b"])
    assert out["a"][-1]["type"] == "done" and len(out["a"][-1]["finish_reasons"]) == 2
    assert out["b"][-1]["type"] == "done" and out["b"][-1]["finish_reasons"] == ["abort"]


def test_kv_map_shows_one_pool_per_node(cluster):
    """The front end's kv frames join the nodes' pools (`pools`: block
    ranges); an n=3 request's tables all lie in one node's range (its samples
    stay on one node) and share its prompt blocks there."""
    srv, nodes = cluster
    seen = []
    with Ws(srv) as ws:
        ws.send({"type": "kv_subscribe"})
        ws.generate("kvreq", prompt=LONG + " (kv map)", max_tokens=200, ignore_eos=True, temperature=1.0,
                    seed=3, n=3)
        ws.run(["kvreq"], on_frame=lambda f: seen.append(f) if f["type"] == "kv" else None)
        ws.send({"type": "kv_unsubscribe"})
        ws.sync()
    joined = [f for f in seen if len(f.get("pools", [])) == len(nodes)]
    assert joined, f"no kv frame with {len(nodes)} pools among {len(seen)}"
    for f in joined:
        assert sum(p["total"] for p in f["pools"]) == f["total"] == len(f["state"])
        assert sorted(p["name"] for p in f["pools"]) == sorted(n.addr for n in nodes)
    mine = [f for f in joined if "kvreq" in f.get("mine", {}).values()
            and any(s["table"] for s in f["seqs"])]
    assert mine, "no joined kv frame showed the request's blocks"
    shared = False
    for f in mine:
        rid = int(next(k for k, v in f["mine"].items() if v == "kvreq"))
        blocks = [b for s in f["seqs"] if s["request"] == rid for b in s["table"]]
        pools = {i for b in blocks for i, p in enumerate(f["pools"]) if p["first"] <= b < p["first"] + p["total"]}
        assert len(pools) == 1, f"one request's blocks on several nodes: {pools}"
        assert all(f["state"][b] == "u" and rid in f["owners"][b] for b in blocks)
        shared |= any(f["ref"][b] > 1 for b in blocks)
    assert shared, "the 3 samples never shared a prompt block"


def test_requests_spread_across_nodes(cluster):
    srv, nodes = cluster
    before = [n.stats().get("pagoda:prompt_tokens_total", 0) for n in nodes]
    threads = [threading.Thread(target=complete, args=(srv, f"Write a short poem about the number {i}", 24))
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    after = [n.stats().get("pagoda:prompt_tokens_total", 0) for n in nodes]
    assert all(a > b for a, b in zip(after, before)), (before, after)


def test_prefix_affinity_keeps_a_prompt_on_one_node(cluster):
    srv, nodes = cluster
    prompt = LONG + " (affinity)"
    hits = lambda: [n.stats().get("pagoda:prefix_cache_hits_total", 0) for n in nodes]
    before = hits()
    for _ in range(4):  # back to back: faster than the nodes report
        complete(srv, prompt, 4)
    gained = [a - b for a, b in zip(hits(), before)]
    assert sorted(gained)[0] == 0 and sorted(gained)[-1] >= 3 * 32, gained
    # The front end saw it too: 3 of the 4 were routed for their cached prefix.
    hot = nodes[gained.index(max(gained))]
    wait_for(lambda: node_metric(srv, "pagoda:engine_node_prefix_cache_hits_total", hot) >= before[nodes.index(hot)]
             + 3 * 32, 5, what="the hot node's report")
    assert node_metric(srv, "pagoda:engine_node_prefix_routed_total", hot) >= 3


def stream(srv, prompt, max_tokens, out: dict):
    """A streamed completion in a thread: out['chunks'] (texts), out['error']."""
    import http.client
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
    conn.request("POST", "/v1/completions", json.dumps(
        {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}),
        {"Content-Type": "application/json"})
    resp = conn.getresponse()
    out.setdefault("chunks", [])
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if "error" in event:
            out["error"] = event["error"]
        else:
            out["chunks"].append(event["choices"][0]["text"])
    out["ended"] = True


def running_on(nodes):
    return [i for i, n in enumerate(nodes) if n.stats().get("pagoda:num_requests_running", 0) > 0]


@pytest.mark.parametrize("max_retries", [None, 0])
def test_killed_node_mid_stream(pagoda_bin, model_path, tmp_path, max_retries):
    # One sequence per node: a second request on the same node waits (streams nothing).
    # It is retried on the other node, unless --engine-max-retries 0: then it fails too.
    nodes = [Node(pagoda_bin, model_path, tmp_path, f"k{i}", ["--max-num-seqs", "1"]) for i in range(2)]
    extra = ["--route-load-weight", "0.5"] + ([] if max_retries is None else ["--engine-max-retries", str(max_retries)])
    srv = front_end(pagoda_bin, model_path, nodes, tmp_path / "front.log", extra)
    try:
        complete(srv, LONG, 2)
        time.sleep(0.5)  # the node that ran it reports its blocks
        streaming = {}
        threading.Thread(target=stream, args=(srv, LONG, 2000, streaming), daemon=True).start()
        wait_for(lambda: len(streaming.get("chunks", [])) >= 3, 60, what="tokens streamed")
        victim = running_on(nodes)
        assert len(victim) == 1, victim
        victim = victim[0]
        waiting = {}
        body = {"prompt": LONG, "max_tokens": 6, "temperature": 0}
        waiter = threading.Thread(target=lambda: waiting.update(r=srv.request("POST", "/v1/completions", body,
                                                                              timeout=120)), daemon=True)
        waiter.start()
        wait_for(lambda: nodes[victim].stats().get("pagoda:num_requests_waiting", 0) >= 1, 30,
                 what="the second request waiting on the same node")
        nodes[victim].http.proc.send_signal(signal.SIGKILL)
        nodes[victim].http.proc.wait(10)
        wait_for(lambda: streaming.get("ended"), 30, what="the stream to end")
        assert node_metric(srv, "pagoda:engine_node_up", nodes[victim]) == 0
        assert "engine_unavailable" in json.dumps(streaming.get("error")), streaming.get("error")
        waiter.join(60)
        status, _, answer = waiting["r"]
        if max_retries == 0:
            assert status == 503 and b"engine_unavailable" in answer, (status, answer[:300])
            return
        assert status == 200, answer[:300]
        assert json.loads(answer)["choices"][0]["finish_reason"] == "length"  # retried on the other node
        other = nodes[1 - victim]
        complete(srv, "Still serving?", 4)
        wait_idle(other)
        nodes[victim].start()  # back on the same port: the front end uses it again
        wait_for(lambda: node_metric(srv, "pagoda:engine_node_up", nodes[victim]) == 1, 30,
                 what="the node back in routing")
        for i in range(4):
            complete(srv, f"A new prompt number {i} for the returning node", 4)
        assert nodes[victim].stats().get("pagoda:prompt_tokens_total", 0) > 0
    finally:
        stop_server(srv, check=False)
        for n in nodes:
            if n.http.alive():
                wait_idle(n)
                stop_server(n.http)


def test_hung_node_times_out_and_comes_back(pagoda_bin, model_path, tmp_path):
    # A stopped (SIGSTOP) node keeps its TCP connection: only the report
    # polls' timeouts can take it out of routing.
    nodes = [Node(pagoda_bin, model_path, tmp_path, f"h{i}") for i in range(2)]
    srv = front_end(pagoda_bin, model_path, nodes, tmp_path / "front.log", ["--engine-report-timeout", "1"])
    try:
        streaming = {}
        threading.Thread(target=stream, args=(srv, LONG, 2000, streaming), daemon=True).start()
        wait_for(lambda: len(streaming.get("chunks", [])) >= 3, 60, what="tokens streamed")
        victim = running_on(nodes)
        assert len(victim) == 1, victim
        victim = victim[0]
        hung = time.monotonic()
        nodes[victim].http.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: streaming.get("ended"), 20, what="the stream on the hung node to end")
        assert time.monotonic() - hung < 10
        assert "engine_unavailable" in json.dumps(streaming.get("error")), streaming.get("error")
        assert complete(srv, "Served by the other node", 4)["choices"][0]["finish_reason"] == "length"
        nodes[victim].http.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: srv.log().count(f"engine node {nodes[victim].addr} is up") >= 2, 30,
                 what="the woken node back in routing")
        wait_idle(nodes[victim])  # it was told to drop the lost request: its blocks are back
    finally:
        for n in nodes:
            n.http.proc.send_signal(signal.SIGCONT)
        stop_server(srv, check=False)
        for n in nodes:
            wait_idle(n)
            stop_server(n.http)


def test_dead_front_end_frees_its_blocks(cluster, pagoda_bin, model_path, tmp_path):
    _, nodes = cluster
    srv = front_end(pagoda_bin, model_path, nodes, tmp_path / "front2.log")
    streams = [{} for _ in range(3)]
    for i, out in enumerate(streams):
        threading.Thread(target=stream, args=(srv, f"{LONG} {i}", 2000, out), daemon=True).start()
    wait_for(lambda: all(len(s.get("chunks", [])) >= 2 for s in streams), 60, what="three streams running")
    assert sum(kv_blocks_used(n.http) for n in nodes) > 0
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(10)
    for n in nodes:
        wait_idle(n)


def test_unreachable_nodes_are_a_clear_error(pagoda_bin, model_path):
    port = free_port()
    start = time.monotonic()
    proc = subprocess.run([pagoda_bin, "serve", model_path, "--engines", f"127.0.0.1:{port}", "--port", "0",
                           "--engine-connect-timeout", "2"], capture_output=True, timeout=60)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "no engine node is reachable" in err and f"127.0.0.1:{port}" in err, err
    assert time.monotonic() - start < 30


def test_web_ui_kv_map_draws_one_pool_per_node(cluster, pagoda_bin, model_path, tmp_path):
    """The chat page behind the front end: its KV map names both nodes in the
    summary, lays each node's pool out on its own rows (the canvas is taller
    than one pool's rows would be) and tells a hovered block's node. Skips,
    with the reason printed, only without Chromium or its driver."""
    from webui_driver import find_browser, start_browser, wait_until
    from webui_page import Page
    chromium, driver, why = find_browser()
    if why:
        print(f"\nSKIP test_web_ui_kv_map_draws_one_pool_per_node: {why}")
        pytest.skip(why)
    _, nodes = cluster
    web = pathlib.Path(__file__).resolve().parents[2] / "web"
    fe = front_end(pagoda_bin, model_path, nodes, tmp_path / "front-ui.log", ["--web-root", str(web)])
    drv = start_browser(chromium, driver)
    try:
        page = Page(drv, fe.base_url)
        page.open(fresh=True)
        summary = wait_until(lambda: (t := page.el("#kv-summary").text) and "2 nodes" in t and t, 30,
                             what="the KV summary to name both nodes")
        for n in nodes:
            assert n.addr in summary, summary
        def tip_at(where):
            return page.js("""const c = document.getElementById('kv-canvas'); const r = c.getBoundingClientRect();
                const y = arguments[0] === 'top' ? r.top + 1 : r.bottom - 1;
                c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 1, clientY: y, bubbles: true}));
                return document.getElementById('kv-tip').textContent;""", where)
        top, bottom = tip_at("top"), tip_at("bottom")
        node_of = re.compile(r"^node (127\.0\.0\.1:\d+), block (\d+)")
        mt, mb = node_of.match(top), node_of.match(bottom)
        assert mt and mb, (top, bottom)
        assert mt.group(2) == "0", f"the first cell is block 0 of the first node: {top}"
        assert {mt.group(1), mb.group(1)} == {n.addr for n in nodes}, (top, bottom)
    finally:
        drv.quit()
        stop_server(fe)
