"""The chat page (web/) in a real browser: headless Debian Chromium through
its local chromedriver (Selenium, offline), against `pagoda serve` on the
real model (conftest's `server` and `key_server`). Everything is checked from
the DOM: connecting, streaming, Stop, Markdown (lists, code, safety),
n samples in columns, beams, the live KV map, conversations across a reload,
regenerate / edit / continue / copy, scroll following, phone width, dark mode
and the API key prompt. Screenshots go to artifacts/web-ui/ (git-ignored)
for a person to look at. Skips, with the reason printed, only when Chromium
or its driver is not installed."""
import json
import re

import pytest
from selenium.webdriver.common.keys import Keys

from webui_driver import console_errors, find_browser, screenshot, start_browser, wait_until
from webui_page import Page

LONG_PROMPT = "Write a long story about a dragon who learns to paint."
# Completion prompts that small models continue by repetition (greedy).
MD_UNIT = "List:\n\n1. one\n2. two\n- three\n\nCode:\n\n```python\nprint('hi')\n```\n\n"
MD_PROMPT = "Markdown examples.\n\n" + MD_UNIT * 3
XSS_UNIT = '<script>window.__pwned=1</script>\n<img src=x onerror="window.__pwned=2">\n'
CHAT_CODE_PROMPT = ("Explain how to reverse a list in Python. "
                    "Give the steps as a numbered list and then a code example.")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, driver, why = find_browser()
    if why:
        print(f"\nSKIP test_web_ui: {why}")
        pytest.skip(why)
    downloads = tmp_path_factory.mktemp("downloads")
    drv = start_browser(chromium, driver, download_dir=str(downloads))
    drv.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    drv.downloads = downloads
    yield drv
    drv.quit()


@pytest.fixture
def page(browser, server):
    browser.set_window_size(1280, 900)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    p = Page(browser, server.base_url)
    yield p
    errors = [e for e in console_errors(browser) if "favicon" not in e]
    assert not errors, f"browser console errors: {errors}"


def stream_lengths(page, want=4):
    """Distinct lengths of the streaming answer's text, sampled until `want`
    growing values were seen (or it ended)."""
    seen = []

    def grew():
        a = page.answer()
        n = len(a["samples"][0]["text"]) if a["samples"] else 0
        if n and (not seen or n > seen[-1]):
            seen.append(n)
        return len(seen) >= want or a["status"] != "streaming"
    wait_until(grew, 60, what="the answer text to grow")
    return seen


def test_connect_stream_stop_and_kv_map(page, server):
    page.open(fresh=True)
    assert "SmolLM2" in page.el("#model").text
    page.set_settings(max_tokens=400, ignore_eos=True, temperature=0.8)
    page.js("document.querySelector('details.panel').open = false")  # the KV map in view
    page.send(LONG_PROMPT)
    assert page.answer()["status"] == "streaming"
    lengths = stream_lengths(page)
    assert len(lengths) >= 4 and lengths == sorted(lengths), lengths
    # The live KV map: this page's request holds blocks while generating.
    kv = wait_until(lambda: (k := page.kv())["mine"] not in (None, "0") and k, 20,
                    what="the KV map to show this request's blocks")
    assert int(kv["used"]) > 0
    assert page.els("#kv-legend li"), "no request in the KV legend while generating"
    assert re.search(r"\d+ used", page.el("#kv-summary").text)
    screenshot(page.drv, "kv-map-during-generation")
    page.stop_generation()
    a = page.wait_answer_done()
    assert a["samples"][0]["finish"] == "abort", a
    tokens = int(re.search(r"(\d+) tokens", a["stats"]).group(1))
    assert 0 < tokens < 400, a["stats"]
    assert re.search(r"TTFT \d+ ms", a["stats"]) and re.search(r"[\d.]+ tok/s", a["stats"]), a["stats"]
    # After the end: no blocks held (a newer snapshot than the one above).
    seq = int(page.kv()["seq"])
    wait_until(lambda: int((k := page.kv())["seq"]) > seq and k["used"] == "0" and k["mine"] == "0", 20,
               what="the KV map to show no held blocks")
    assert not page.els("#kv-legend li")
    # Disconnect and reconnect.
    page.el("#reconnect").click()
    wait_until(lambda: page.el("#conn-text").text.startswith("Disconnected"), 10, what="disconnect")
    page.el("#reconnect").click()
    page.wait_connected()
    # A request the server refuses: the error is shown plainly, in the turn.
    page.set_settings(top_p=5)
    page.send("Hello")
    a = page.wait_answer_done()
    assert a["status"] == "error", a
    assert re.match(r"bad_request: .*top_p", page.last(".notice.error").text), page.last(".notice.error").text


def test_markdown_list_and_code(page):
    page.open(fresh=True)
    page.set_settings(max_tokens=40, temperature=0)
    page.send(MD_PROMPT, mode="completion")
    a = page.wait_answer_done()
    assert a["samples"][0]["finish"] == "length", a
    assert page.last(".md ol > li"), "no ordered list rendered"
    assert page.last(".md ul > li"), "no unordered list rendered"
    code = page.last(".md pre > code")
    assert code.text.strip() == "print('hi')"
    assert code.get_attribute("class") == "language-python"
    assert page.last(".code-block .code-lang").text == "python"
    # The copy button puts the code on the clipboard.
    page.drv.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": page.base_url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    page.last(".code-block .copy").click()
    wait_until(lambda: page.last(".code-block .copy").get_attribute("data-copied") == "yes", 5,
               what="the copy button to report success")
    clip = page.drv.execute_async_script("navigator.clipboard.readText().then(arguments[0], e => arguments[0]('ERR ' + e))")
    assert clip == "print('hi')", clip
    # A chat answer with code, for the screenshot (and its own checks).
    page.set_settings(max_tokens=160, temperature=0)
    page.send(CHAT_CODE_PROMPT)
    page.wait_answer_done()
    assert page.last(".md pre > code"), "the chat answer has no code block"
    page.js("arguments[0].scrollIntoView({block: 'start'})", page.last(".md pre"))
    screenshot(page.drv, "markdown-answer-with-code")


def test_model_html_stays_inert(page):
    page.open(fresh=True)
    page.set_settings(max_tokens=40, temperature=0)
    page.js("window.__pwned = undefined")
    page.send(XSS_UNIT * 6, mode="completion")
    a = page.wait_answer_done()
    text = a["samples"][0]["text"]
    assert "<script>" in text and "onerror=" in text, text  # shown as text...
    assert not page.in_last("script, img, [onerror]")         # ...and never as markup
    assert not page.els("#transcript script, #transcript img")
    assert page.js("return window.__pwned") is None


def test_markdown_renderer_rules(page):
    """markdown.js itself, in the browser: escaping, link rules, the block
    kinds, and incremental streaming (same DOM as a full render, linear work)."""
    page.open()
    result = page.drv.execute_async_script("""
      const done = arguments[0];
      import('/markdown.js').then(({renderMarkdown, MarkdownView}) => {
        const box = (t) => { const d = document.createElement('div'); renderMarkdown(t, d); return d; };
        const out = {};
        const evil = box('<img src=x onerror="window.__md=1"> <script>window.__md=2</script> ' +
          '[a](javascript:alert(1)) [b](data:text/html,x) [c](https://example.com/x?a=1&b=2) <b>bold</b>\\n' +
          '```html\\n<script>window.__md=3</script>\\n```');
        out.evilTags = [...evil.querySelectorAll('*')].map(e => e.tagName.toLowerCase());
        out.evilText = evil.textContent;
        out.links = [...evil.querySelectorAll('a')].map(a => [a.getAttribute('href'), a.rel, a.target]);
        const rich = box('# Title\\n\\nSome *em*, **strong**, `code` and ~~del~~.\\n\\n> quoted\\n\\n' +
          '| a | b |\\n|:--|--:|\\n| 1 | 2 |\\n\\n1. x\\n   - nested\\n2. y\\n\\n---\\n');
        out.rich = [...rich.querySelectorAll('*')].map(e => e.tagName.toLowerCase());
        // Streaming: 300 blocks fed 7 characters at a time.
        let doc = '';
        for (let i = 0; i < 300; i++) doc += i % 3 === 0 ? `${i}. item ${i}\\n${i+1}. more\\n\\n` :
          i % 3 === 1 ? '```js\\nlet x = ' + i + ';\\n```\\n\\n' : `Para **${i}** with [link](https://e.org/${i}).\\n\\n`;
        const live = document.createElement('div');
        const view = new MarkdownView(live);
        for (let k = 7; k < doc.length + 7; k += 7) view.update(doc.slice(0, k));
        out.same = live.innerHTML === box(doc).innerHTML;
        out.work = view.work;
        out.len = doc.length;
        out.pwned = window.__md ?? null;
        done(out);
      }, (e) => done({error: String(e)}));
    """)
    assert "error" not in result, result
    assert "img" not in result["evilTags"] and "script" not in result["evilTags"] and "b" not in result["evilTags"], result
    assert '<img src=x onerror="window.__md=1">' in result["evilText"]
    assert "<script>window.__md=3</script>" in result["evilText"]
    assert result["links"] == [["https://example.com/x?a=1&b=2", "noopener noreferrer", "_blank"]], result["links"]
    assert result["pwned"] is None
    for tag in ("h1", "em", "strong", "code", "del", "blockquote", "table", "th", "td", "ol", "ul", "li", "hr"):
        assert tag in result["rich"], (tag, result["rich"])
    assert result["same"], "incremental rendering differs from a full render"
    assert result["work"] < 40 * result["len"], result  # linear, not quadratic (~len^2/14 = 50x more)


def test_samples_in_columns_and_beams(page):
    page.open(fresh=True)
    page.set_settings(n=2, temperature=1, max_tokens=24)
    page.send("Name a fruit.")
    a = page.wait_answer_done()
    assert len(a["samples"]) == 2, a
    s0, s1 = a["samples"]
    assert s0["top"] == s1["top"] and s1["left"] > s0["left"], a  # side by side
    assert all(s["finish"] in ("stop", "length") for s in a["samples"]), a
    assert s0["chosen"] and not s1["chosen"]
    page.in_last(".sample .pick")[1].click()
    wait_until(lambda: page.answer()["samples"][1]["chosen"], 5, what="sample 2 to be chosen")
    page.set_settings(n=3, temperature=1, max_tokens=40)
    page.send("Write one sentence about the sea.")
    a = page.wait_answer_done()
    assert len(a["samples"]) == 3 and len({s["left"] for s in a["samples"]}) == 3, a
    screenshot(page.drv, "n3-columns")
    # A beam answer sent while the reader is scrolled up is brought into view.
    page.js("document.getElementById('transcript').scrollTop = 0")
    page.set_settings(beam_width=3, n=2, max_tokens=16)
    page.send("The capital of France is")
    a = page.wait_answer_done()
    assert len(a["beams"]) == 2 and all(re.search(r"score -?[\d.]+", b["meta"]) for b in a["beams"]), a
    in_view = page.js("""const t = document.getElementById('transcript').getBoundingClientRect();
      const all = document.querySelectorAll('#transcript .msg-assistant');
      const r = all[all.length - 1].getBoundingClientRect();
      return r.top < t.bottom && r.bottom > t.top;""")
    assert in_view, "the beam answer is off-screen"
    screenshot(page.drv, "beam-answer")


def test_tool_calls_show_as_cards(page):
    """Tools pasted in the settings go out with the chat request (over
    /v1/chat/completions); the answer's calls appear as cards with the
    function's name and its arguments, not as <tool_call> markup."""
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}}}
    page.open(fresh=True)
    page.set_settings(tools=json.dumps([weather]), tool_choice="required", temperature=0, max_tokens=60)
    page.send("What is the weather in Paris?")
    a = page.wait_answer_done()
    assert a["status"] == "done", a
    names = [e.text for e in page.in_last(".tool-call .tool-name")]
    assert names and all(n == "call get_weather" for n in names), names
    args = page.in_last(".tool-call .tool-args")[0].text
    assert "city" in json.loads(args), args
    assert "<tool_call>" not in a["samples"][0]["text"], a
    screenshot(page.drv, "tool-calls")
    page.set_settings(tools="[not json")
    before = page.count_answers()
    page.js("document.getElementById('prompt').value = 'Again?'")
    page.el("#send").click()
    wait_until(lambda: page.in_last(".notice") or page.js(
        "return [...document.querySelectorAll('#transcript .notice')].some(n => n.textContent.startsWith('Tools'))"),
        5, what="the bad tools notice")
    assert page.count_answers() == before


def test_answer_schema_shapes_the_answer(page):
    """A JSON Schema pasted in the settings goes out as response_format
    json_schema: the answer is JSON that matches it."""
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "sunny": {"type": "boolean"}},
              "required": ["city", "sunny"], "additionalProperties": False}
    page.open(fresh=True)
    page.set_settings(**{"answer-schema": json.dumps(schema), "temperature": 0, "max_tokens": 60})
    page.send("Is it sunny in Paris?")
    a = page.wait_answer_done()
    assert a["status"] == "done" and a["samples"][0]["finish"] == "stop", a
    answer = json.loads(a["samples"][0]["text"])
    assert set(answer) == {"city", "sunny"} and isinstance(answer["sunny"], bool), answer


def test_scroll_follow_and_jump_to_latest(page):
    page.open(fresh=True)
    page.set_settings(max_tokens=30, temperature=0, ignore_eos=True)
    for _ in range(3):  # enough content to scroll
        page.send("Count from one to twenty.")
        page.wait_answer_done()
    m = page.transcript_metrics()
    assert m["height"] > m["client"] + 100, m
    assert m["height"] - m["top"] - m["client"] < 50, f"not following the end: {m}"
    page.set_settings(max_tokens=300, temperature=0.8, ignore_eos=True)
    page.send(LONG_PROMPT)
    stream_lengths(page, want=2)
    page.js("document.getElementById('transcript').scrollTop = 0")
    wait_until(lambda: page.transcript_metrics()["jump"], 5, what="the jump-to-latest button")
    grown = len(page.answer()["samples"][0]["text"])
    wait_until(lambda: len(page.answer()["samples"][0]["text"]) > grown + 20, 30, what="more text")
    assert page.transcript_metrics()["top"] < 5, "the view moved although the reader scrolled up"
    page.el("#jump").click()
    wait_until(lambda: not page.transcript_metrics()["jump"], 5, what="the jump button to go")
    wait_until(lambda: (m := page.transcript_metrics())["height"] - m["top"] - m["client"] < 50, 5,
               what="the view at the end")
    page.el("#prompt").send_keys(Keys.ESCAPE)  # Esc stops
    assert page.wait_answer_done()["samples"][0]["finish"] == "abort"


def test_continue_regenerate_edit_copy(page):
    page.open(fresh=True)
    page.set_settings(max_tokens=8, temperature=0, ignore_eos=True)
    page.send("Tell me about the moon.")
    a = page.wait_answer_done()
    first = a["samples"][0]["text"]
    assert a["samples"][0]["finish"] == "length" and "Continue" in a["actions"], a
    # Continue: the same answer grows from where it stopped.
    page.last(".msg-actions .continue").click()
    a = wait_until(lambda: (x := page.answer())["status"] == "done" and len(x["samples"][0]["text"]) > len(first) and x,
                   60, what="the continued answer")
    assert a["samples"][0]["text"].startswith(first), (first, a)
    assert a["samples"][0]["finish"] == "length", a
    continued = a["samples"][0]["text"]
    # Copy the message.
    page.drv.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": page.base_url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    page.last(".msg-actions .copy").click()
    clip = wait_until(lambda: page.drv.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], () => arguments[0](''))") == continued, 5,
        what="the answer on the clipboard")
    assert clip
    # Regenerate: a second branch; the first stays reachable.
    page.set_settings(max_tokens=8, temperature=1, seed=7, ignore_eos=True)
    page.last(".msg-actions .regenerate").click()
    a = page.wait_answer_done()
    assert a["branch"] == "2/2", a
    page.last(".branch-prev").click()
    wait_until(lambda: page.answer()["branch"] == "1/2", 5, what="branch 1/2")
    assert page.answer()["samples"][0]["text"] == continued
    # Edit the user message and send it again: a new user branch with its own answer.
    page.els("#transcript .msg-user .edit")[-1].click()
    area = page.el("#transcript .edit-form textarea")
    area.clear()
    area.send_keys("Tell me about the sun.")
    page.el("#transcript .edit-form .edit-send").click()
    a = page.wait_answer_done()
    assert page.els("#transcript .msg-user .bubble")[-1].text == "Tell me about the sun."
    assert page.els("#transcript .msg-user .branch-pos")[-1].text == "2/2"
    assert a["branch"] is None and a["samples"][0]["text"], a
    page.els("#transcript .msg-user .branch-prev")[-1].click()
    wait_until(lambda: page.els("#transcript .msg-user .bubble")[-1].text == "Tell me about the moon.", 5,
               what="the original user message")
    assert page.answer()["samples"][0]["text"] == continued  # its selected branch is kept


def conv_titles(page):
    return [e.text for e in page.els("#conv-list .conv-open")]


def test_conversations_sidebar_survive_reload(page, browser):
    page.open(fresh=True)
    page.set_settings(max_tokens=12, temperature=0)
    page.send("What is a pagoda?")
    page.wait_answer_done()
    answer = page.answer()["samples"][0]["text"]
    page.el("#conv-new").click()
    wait_until(lambda: not page.els("#transcript .msg"), 5, what="an empty new chat")
    page.send("Name three colours.")
    page.wait_answer_done()
    assert conv_titles(page) == ["Name three colours.", "What is a pagoda?"], conv_titles(page)
    # Rename (inline), then search by title.
    page.els("#conv-list .conv-rename")[0].click()
    box = page.el("#conv-list .conv-title-input")
    box.clear()
    box.send_keys("Colours", "\n")
    wait_until(lambda: conv_titles(page)[0] == "Colours", 5, what="the renamed title")
    assert page.el("#conv-title").text == "Colours"
    page.el("#conv-search").send_keys("pago")
    wait_until(lambda: conv_titles(page) == ["What is a pagoda?"], 5, what="the search filter")
    page.el("#conv-search").clear()
    page.el("#conv-search").send_keys(" ")  # input event; a blank query shows all
    wait_until(lambda: len(conv_titles(page)) == 2, 5, what="all titles again")
    screenshot(page.drv, "conversation-sidebar")
    # Reload: both conversations and the open one's transcript are back.
    page.open()
    assert conv_titles(page) == ["Colours", "What is a pagoda?"]
    assert page.els("#transcript .msg-user .bubble")[0].text == "Name three colours."
    page.els("#conv-list .conv-open")[1].click()
    wait_until(lambda: page.answer() and page.answer()["samples"][0]["text"] == answer, 5,
               what="the first conversation's answer")
    # Export, delete (with confirmation), import back.
    page.el("#conv-export").click()
    files = wait_until(lambda: [p for p in browser.downloads.glob("pagoda-conversations-*.json")], 10,
                       what="the export download")
    exported = json.loads(files[0].read_text())
    assert exported["format"] == "pagoda-conversations" and len(exported["conversations"]) == 2
    titles = sorted(c["title"] for c in exported["conversations"])
    assert titles == ["Colours", "What is a pagoda?"]
    page.els("#conv-list .conv-delete")[0].click()
    page.el("#conv-list .conv-delete.confirm").click()
    wait_until(lambda: len(conv_titles(page)) == 1, 5, what="the deletion")
    page.el("#conv-import-file").send_keys(str(files[0]))
    wait_until(lambda: len(conv_titles(page)) == 3, 5, what="the import")
    assert "Imported 2 conversations" in page.el("#conv-status").text


def test_phone_width_and_dark_mode(page, browser):
    page.open(fresh=True)
    page.set_settings(max_tokens=24, temperature=0)
    page.send("Give me two tips for sleeping well.")
    page.wait_answer_done()
    browser.set_window_size(390, 844)
    wait_until(lambda: page.js("return window.innerWidth") <= 420, 5, what="the phone width")
    overflow = page.js("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px at phone width"
    wait_until(lambda: page.js("return document.getElementById('conversations').getBoundingClientRect().right") <= 0,
               5, what="the conversation drawer to be closed at phone width")
    screenshot(browser, "phone-width")
    page.el("#toggle-convs").click()
    wait_until(lambda: page.js("return document.getElementById('conversations').getBoundingClientRect().left") >= 0,
               5, what="the conversation drawer")
    screenshot(browser, "phone-width-sidebar")
    page.el("#convs-close").click()
    wait_until(lambda: page.js("return document.getElementById('conversations').getBoundingClientRect().right") <= 0,
               5, what="the drawer to close")
    browser.set_window_size(1280, 900)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    bg = page.js("return getComputedStyle(document.body).backgroundColor")
    rgb = [int(x) for x in re.findall(r"\d+", bg)[:3]]
    assert sum(rgb) < 150, f"dark mode background is {bg}"
    screenshot(browser, "dark-mode")


def test_api_key_prompt(browser, key_server):
    p = Page(browser, key_server.base_url)
    browser.get(key_server.base_url + "/")
    p.js("localStorage.clear()")
    browser.get(key_server.base_url + "/")
    wait_until(lambda: p.el("#conn-text").text.startswith("Disconnected ("), 20, what="a refused connection")
    assert "API key" in p.el("#conn-text").text
    p.el("#api-key").send_keys("test-key-0123456789")
    p.el("#key-form button[type=submit]").click()
    p.wait_connected()
    console_errors(browser)  # the refused socket logged an error on purpose: drop it
