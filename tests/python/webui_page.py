"""Page helpers for test_web_ui.py: drive the chat page (web/) through
Selenium and read its state from the DOM. Every wait is a wait-until with a
bound (webui_driver.wait_until), never a fixed sleep."""
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from webui_driver import wait_until

GEN_TIMEOUT_S = 60.0

# Reads the last assistant message from the DOM.
LAST_ANSWER_JS = """
const all = document.querySelectorAll('#transcript .msg-assistant');
const m = all[all.length - 1];
if (!m) return null;
return {
  status: m.dataset.status,
  samples: [...m.querySelectorAll('.sample')].map(s => ({
    text: s.querySelector('.text').textContent,
    finish: s.querySelector('.finish').textContent,
    left: Math.round(s.getBoundingClientRect().left),
    top: Math.round(s.getBoundingClientRect().top),
    chosen: s.classList.contains('chosen')})),
  beams: [...m.querySelectorAll('.beams > li')].map(b => ({
    text: b.querySelector('.text').textContent, meta: b.querySelector('.beam-meta').textContent})),
  stats: m.querySelector('.stats').textContent,
  branch: m.querySelector('.branch-pos')?.textContent ?? null,
  actions: [...m.querySelectorAll('.msg-actions button')].map(b => b.textContent),
};
"""


class Page:
    def __init__(self, drv, base_url: str):
        self.drv = drv
        self.base_url = base_url

    # ----------------------------------------------------------- basics
    def js(self, script, *args):
        return self.drv.execute_script(script, *args)

    def el(self, css):
        return self.drv.find_element(By.CSS_SELECTOR, css)

    def els(self, css):
        return self.drv.find_elements(By.CSS_SELECTOR, css)

    def open(self, fresh: bool = False):
        """Loads the page (fresh: with empty localStorage) and waits for hello."""
        self.drv.get(self.base_url + "/")
        if fresh:
            self.js("localStorage.clear()")
            self.drv.get(self.base_url + "/")
        self.wait_connected()

    def wait_connected(self):
        wait_until(lambda: self.js("return document.body.dataset.conn === 'open' && "
                                   "document.body.dataset.ready === 'true' && "
                                   "!document.getElementById('send').disabled"),
                   30, what="the page to connect (send enabled)")

    def set_settings(self, **values):
        """Sets sampling fields by id (numbers/strings; booleans for
        checkboxes) the way a user would leave them: with change events."""
        defaults = {"temperature": "0.7", "top_p": "0.95", "top_k": "0", "min_p": "0",
                    "repetition_penalty": "1", "max_tokens": "256", "seed": "", "n": "1",
                    "beam_width": "0", "stop-strings": "", "system": "", "ignore_eos": False,
                    "tools": "", "tool_choice": "auto", "answer-schema": ""}
        defaults.update(values)
        self.js("""
          for (const [id, v] of Object.entries(arguments[0])) {
            const el = document.getElementById(id);
            if (typeof v === 'boolean') el.checked = v; else el.value = String(v);
            el.dispatchEvent(new Event('change', {bubbles: true}));
          }""", defaults)

    def set_mode(self, mode: str):
        self.el(f"input[name=mode][value={mode}]").click()

    def send(self, text: str, mode: str = "chat"):
        """Types a one-line message and presses Enter; a multi-line one is
        filled in and sent with the Send button."""
        self.set_mode(mode)
        before = self.count_answers()
        box = self.el("#prompt")
        box.clear()
        if "\n" in text:
            self.js("document.getElementById('prompt').value = arguments[0]", text)
            self.el("#send").click()
        else:
            box.send_keys(text, Keys.ENTER)
        wait_until(lambda: self.count_answers() == before + 1, 10, what="the new answer to appear")

    def count_answers(self) -> int:
        return len(self.els("#transcript .msg-assistant"))

    def answer(self) -> dict:
        return self.js(LAST_ANSWER_JS)

    def wait_answer_done(self, timeout=GEN_TIMEOUT_S) -> dict:
        wait_until(lambda: self.answer()["status"] in ("done", "error"), timeout, what="the answer to finish")
        return self.answer()

    def last(self, css):
        """The last match of css inside the last assistant message."""
        found = self.in_last(css)
        assert found, f"no {css} in the last answer"
        return found[-1]

    def in_last(self, css) -> list:
        """Every match of css inside the last assistant message."""
        return self.js("const all = document.querySelectorAll('#transcript .msg-assistant');"
                        "return all.length ? [...all[all.length - 1].querySelectorAll(arguments[0])] : [];", css)

    def kv(self) -> dict:
        return self.js("const c = document.getElementById('kv-canvas').dataset;"
                       "return {used: c.used, mine: c.mine, seq: c.seq};")

    def transcript_metrics(self) -> dict:
        return self.js("""const t = document.getElementById('transcript');
          return {top: t.scrollTop, height: t.scrollHeight, client: t.clientHeight,
                  jump: !document.getElementById('jump').hidden};""")

    def stop_generation(self):
        self.el("#stop").click()
