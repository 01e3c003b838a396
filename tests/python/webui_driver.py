"""Headless Chromium for the web UI test (test_web_ui.py): Debian's
`chromium` driven through its local `chromedriver` by Selenium, offline
(SE_OFFLINE=true and an explicit driver path, so Selenium Manager never
downloads anything). find_browser() says why it cannot run, if it cannot.
PAGODA_CHROMIUM / PAGODA_CHROMEDRIVER override the paths."""
import os
import pathlib
import shutil
import time

BROWSER_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
DRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
ARTIFACTS = pathlib.Path(__file__).resolve().parents[2] / "artifacts" / "web-ui"


def find_browser():
    """(browser path, driver path, None) or (None, None, reason)."""
    def pick(env, candidates, name):
        wanted = [os.environ[env]] if os.environ.get(env) else list(candidates)
        found = next((p for p in wanted if os.access(p, os.X_OK)), None)
        return found or (None if os.environ.get(env) else shutil.which(name))
    browser = pick("PAGODA_CHROMIUM", BROWSER_CANDIDATES, "chromium")
    driver = pick("PAGODA_CHROMEDRIVER", DRIVER_CANDIDATES, "chromedriver")
    if not browser:
        return None, None, "chromium not found (tools/dev installs the Debian packages chromium and chromium-driver)"
    if not driver:
        return None, None, "chromedriver not found (Debian package chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None, None, "selenium is not installed in the test venv (tools/requirements-test.txt)"
    return browser, driver, None


def start_browser(browser: str, driver_path: str, width: int = 1280, height: int = 900,
                  download_dir: str | None = None):
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                f"--window-size={width},{height}", "--force-color-profile=srgb",
                "--hide-scrollbars", "--lang=en-US"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if download_dir:
        opts.add_experimental_option("prefs", {"download.default_directory": download_dir,
                                               "download.prompt_for_download": False})
    service = Service(executable_path=driver_path)
    drv = webdriver.Chrome(service=service, options=opts)
    drv.set_script_timeout(30)
    drv.set_page_load_timeout(30)
    return drv


def screenshot(drv, name: str) -> pathlib.Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    drv.save_screenshot(str(path))
    return path


def console_errors(drv) -> list:
    """SEVERE browser console entries (uncaught exceptions, failed loads)."""
    try:
        logs = drv.get_log("browser")
    except Exception:  # noqa: BLE001 - logging is optional in some drivers
        return []
    return [e["message"] for e in logs if e.get("level") == "SEVERE"]


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    """Polls predicate() (exceptions count as false) until it returns a true
    value; fails after timeout seconds naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except Exception as err:  # noqa: BLE001 - stale elements while the DOM changes
            last = err
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        time.sleep(interval)
