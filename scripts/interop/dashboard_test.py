#!/usr/bin/env python3
"""Drives the daemon's dashboard page in headless Chromium, as a person would.

Run by scripts/interop/dashboard-interop.sh, which starts nginx (the files) and the daemon (the page and its RPC):

    python3 scripts/interop/dashboard_test.py --page http://127.0.0.1:6800/ --secret S \
        --files http://127.0.0.1:PORT --out-dir OUT --shots .build/dashboard-screenshots \
        --fast fast.bin=SHA256 --slow slow/slow.bin=SHA256 --remove slow/remove.bin --extra slow/extra.bin

Steps: a wrong secret is refused plainly; the right one signs in (form, storage, `#token=`); a URL added with
a checksum reaches 100 % and the file on disk has the expected SHA-256; a slow one is paused and resumed and
still arrives identical; one is removed; the speed limit is changed; the page at 360 px wide and in the dark
scheme. A screenshot at each step. Prints `ok`/`FAIL` lines and `N passed, N failed`; exits 1 on any failure.

Needs: Debian's chromium and chromium-driver, and Python's selenium (4.x).
"""

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
import traceback

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

DESKTOP = (1280, 1500)
NARROW = (360, 1900)
ALLOWED_ACTIONS = {"Pause", "Resume", "Remove", "Retry", "Move up", "Move down"}


class StepFailed(Exception):
    pass


def find_exe(*names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
        for d in ("/usr/bin", "/usr/lib/chromium", "/usr/lib/chromium-browser"):
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None


def make_driver(profile):
    chrome = find_exe("chromium", "chromium-browser", "google-chrome")
    chromedriver = find_exe("chromedriver", "chromium-driver")
    if not chrome or not chromedriver:
        raise SystemExit("dashboard: chromium and chromedriver are needed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=chromedriver)
    return webdriver.Chrome(service=service, options=options)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_file(spec):
    name, _, sha = spec.partition("=")
    return name, sha.lower()


# The row of a download, found by the file name in its text (what a person reads).
ROW_JS = """
const name = arguments[0];
for (const li of document.querySelectorAll('li.dl')) {
  const n = li.querySelector('.dl-name');
  if (n && n.textContent === name) {
    const p = li.querySelector('progress');
    return {
      status: li.dataset.status || '',
      badge: (li.querySelector('.badge') || {}).textContent || '',
      value: p && p.hasAttribute('value') ? Number(p.value) : null,
      max: p ? Number(p.max) : null,
      text: li.textContent,
      list: li.parentNode ? li.parentNode.id : '',
      buttons: [...li.querySelectorAll('button')].map((b) => ({ name: b.textContent.trim(), disabled: b.disabled })),
      stats: (li.querySelector('.dl-stats') || {}).textContent || '',
      error: (li.querySelector('.dl-error') || {}).textContent || '',
      mapShown: !!(li.querySelector('canvas.segmap') && !li.querySelector('canvas.segmap').hidden),
    };
  }
}
return null;
"""


class Test:
    def __init__(self, args):
        self.args = args
        self.passed = 0
        self.failed = 0
        self.shot_index = 0
        os.makedirs(args.shots, exist_ok=True)
        self.profile = tempfile.mkdtemp(prefix="downpour-dashboard-chrome.")
        self.driver = make_driver(self.profile)
        self.driver.set_window_size(*DESKTOP)
        self.signed_in = False

    # ------------------------------------------------------------------ helpers
    def log(self, text):
        print(f"dashboard: {text}", flush=True)

    def shot(self, name):
        self.shot_index += 1
        path = os.path.join(self.args.shots, f"{self.shot_index:02d}-{name}.png")
        try:
            self.driver.save_screenshot(path)
        except WebDriverException as e:
            self.log(f"screenshot {path} failed: {e.msg}")
        return path

    def wait(self, what, predicate, timeout=30.0, interval=0.2):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = predicate()
                if last:
                    return last
            except WebDriverException as e:
                last = e.msg
            time.sleep(interval)
        raise StepFailed(f"timed out after {timeout:.0f} s waiting for {what} (last seen: {last!r})")

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def visible(self, element_id):
        return self.js(
            "const e = document.getElementById(arguments[0]); return !!e && !e.hidden && e.offsetParent !== null;",
            element_id,
        )

    def text_of(self, element_id):
        return self.js("const e = document.getElementById(arguments[0]); return e ? e.textContent : null;", element_id)

    def row(self, name):
        return self.js(ROW_JS, name)

    def button(self, text, scope=None):
        """The button whose accessible name (its text) is `text`, in `scope` or the page."""
        root = scope or self.driver
        for b in root.find_elements(By.XPATH, f".//button[normalize-space()='{text}']"):
            if b.is_displayed():
                return b
        raise StepFailed(f"no visible button named {text!r}")

    def row_element(self, name):
        return self.js(
            "for (const li of document.querySelectorAll('li.dl')) {"
            "  const n = li.querySelector('.dl-name'); if (n && n.textContent === arguments[0]) return li; }"
            "return null;",
            name,
        )

    def click_in_row(self, name, action):
        """Clicks the enabled `action` button in the row of `name`. The row's buttons are rebuilt when its set
        changes (a neighbour paused, the list reordered): a button found just before that is gone, and the click
        is tried again on the row as it is now, as a person would."""
        if self.row_element(name) is None:
            raise StepFailed(f"no row for {name}")

        def click():
            li = self.row_element(name)
            if li is None:
                return None
            b = next(
                (x for x in li.find_elements(By.XPATH, f".//button[normalize-space()='{action}']") if x.is_enabled()),
                None,
            )
            if b is None:
                return None
            b.click()
            return True

        self.wait(f"an enabled {action!r} button in the row of {name}, clicked", click, timeout=10)

    def fill(self, element_id, text):
        e = self.driver.find_element(By.ID, element_id)
        e.clear()
        if text:
            e.send_keys(text)

    def add(self, url, out=None, split=None, checksum=None):
        self.fill("uris", url)
        if out or split or checksum:
            self.js("document.getElementById('add-options').open = true;")
        self.fill("opt-out", out or "")
        self.fill("opt-split", str(split) if split else "")
        self.fill("opt-checksum", checksum or "")
        self.button("Add").click()
        self.wait("the page to confirm the add", lambda: "Added" in (self.text_of("add-msg") or ""), timeout=20)

    def out_path(self, name):
        return os.path.join(self.args.out_dir, os.path.basename(name))

    def file_url(self, name):
        return f"{self.args.files.rstrip('/')}/{name}"

    def check_row_accessibility(self):
        """Each row: an li whose text has the file name, a <progress> 0-100, buttons named by their action."""
        rows = self.js(
            "return [...document.querySelectorAll('li.dl')].map((li) => ({"
            " tag: li.tagName, name: (li.querySelector('.dl-name') || {}).textContent || '', text: li.textContent,"
            " progress: li.querySelectorAll('progress').length,"
            " max: (li.querySelector('progress') || {}).max,"
            " buttons: [...li.querySelectorAll('button')].map((b) => b.textContent.trim()) }));"
        )
        for r in rows:
            if r["tag"] != "LI" or not r["name"] or r["name"] not in r["text"]:
                raise StepFailed(f"a download row is not a list item with its file name: {r}")
            if r["progress"] != 1 or r["max"] != 100:
                raise StepFailed(f"row {r['name']} has no <progress max=100>: {r}")
            bad = [b for b in r["buttons"] if b not in ALLOWED_ACTIONS]
            if bad:
                raise StepFailed(f"row {r['name']} has buttons not named by their action: {bad}")
        return len(rows)

    # -------------------------------------------------------------------- steps
    def step_wrong_secret(self):
        d = self.driver
        d.get(f"{self.args.page}#token=not-{self.args.secret}")
        self.wait("the sign-in form", lambda: self.visible("signin"), timeout=20)
        msg = self.wait("a plain 'wrong secret' message", lambda: self.text_of("signin-error"), timeout=20)
        if "wrong secret" not in msg.lower():
            raise StepFailed(f"the refusal does not say so plainly: {msg!r}")
        if self.visible("app"):
            raise StepFailed("the downloads are visible without the secret")
        if "token=" in d.current_url:
            raise StepFailed(f"#token= stayed in the address bar: {d.current_url}")
        stored = self.js("return localStorage.getItem('downpour.secret');")
        if stored:
            raise StepFailed("a refused secret was kept in storage")
        # The form says it too.
        self.fill("secret", "also-wrong")
        self.button("Sign in").click()
        self.wait("the refusal of a typed wrong secret",
                  lambda: "wrong secret" in (self.text_of("signin-error") or "").lower() and self.visible("signin"),
                  timeout=20)
        self.shot("wrong-secret")
        return f"refused with {msg!r}"

    def step_sign_in(self):
        d = self.driver
        self.fill("secret", self.args.secret)
        self.button("Sign in").click()
        self.wait("the downloads after signing in", lambda: self.visible("app"), timeout=20)
        stored = self.wait("the secret in the browser's storage",
                           lambda: self.js("return localStorage.getItem('downpour.secret');"), timeout=5)
        if stored != self.args.secret:
            raise StepFailed("the secret was not kept in storage")
        d.refresh()
        self.wait("signed in again after a reload (from storage)", lambda: self.visible("app"), timeout=20)
        # #token= on a browser that has nothing stored.
        self.js("localStorage.clear();")
        d.get("about:blank")
        d.get(f"{self.args.page}#token={self.args.secret}")
        self.wait("signed in from #token=", lambda: self.visible("app"), timeout=20)
        if "token" in d.current_url:
            raise StepFailed(f"#token= stayed in the address bar: {d.current_url}")
        conn = self.wait("the connection status", lambda: self.text_of("connection"), timeout=5)
        if self.args.expect_push:
            conn = self.wait("the daemon's push (status 'Live', class live)",
                             lambda: self.js("const e = document.getElementById('connection');"
                                             " return e.classList.contains('live') && e.textContent === 'Live'"
                                             " && e.textContent;"), timeout=10)
        self.signed_in = True
        self.shot("signed-in")
        return f"form, storage and #token= (address now {d.current_url}); status {conn!r}"

    def step_add_complete(self):
        name, sha = parse_file(self.args.fast)
        base = os.path.basename(name)
        self.add(self.file_url(name), split=4, checksum=f"sha-256={sha}")
        seen = []

        def done():
            r = self.row(base)
            if r and r["value"] is not None and (not seen or seen[-1] != r["value"]):
                seen.append(r["value"])
            return r if r and r["value"] == 100 and r["status"] == "complete" else None

        r = self.wait(f"{base} to reach 100 %", done, timeout=self.args.timeout)
        if r["max"] != 100:
            raise StepFailed(f"progress max is {r['max']}")
        self.shot("added-complete")
        path = self.out_path(name)
        self.wait(f"{path} on disk", lambda: os.path.isfile(path), timeout=10)
        got = sha256_of(path)
        if got != sha:
            raise StepFailed(f"{path}: sha256 {got}, expected {sha}")
        n = self.check_row_accessibility()
        return f"{base}: progress {seen} → complete, sha256 identical; {n} rows accessible"

    def step_pause_resume(self):
        name, sha = parse_file(self.args.slow)
        base = os.path.basename(name)
        self.add(self.file_url(name), split=2)
        self.wait(f"{base} downloading with bytes in", lambda: (lambda r: r and r["status"] == "active" and (r["value"] or 0) > 0)(self.row(base)),
                  timeout=60)
        self.wait(f"the segment map of {base}", lambda: self.row(base)["mapShown"], timeout=10)
        if self.args.expect_push:
            conns = self.wait(f"the connections of {base} (connectionRanges of the push)",
                              lambda: self.js("for (const li of document.querySelectorAll('li.dl')) {"
                                              " if (li.querySelector('.dl-name').textContent === arguments[0]) {"
                                              " const c = li.querySelector('.dl-conns');"
                                              " return c && !c.hidden && c.textContent; } } return null;", base),
                              timeout=10)
            self.log(f"{base} connections: {conns}")
        self.shot("active-segment-map")
        self.click_in_row(base, "Pause")
        r = self.wait(f"{base} paused", lambda: (lambda r: r if r and r["status"] == "paused" else None)(self.row(base)),
                      timeout=30)
        if r["badge"] != "Paused":
            raise StepFailed(f"the status text says {r['badge']!r}, not 'Paused'")
        if "Resume" not in [b["name"] for b in r["buttons"]]:
            raise StepFailed(f"a paused download has no Resume button: {r['buttons']}")
        self.shot("paused")
        at_pause = r["value"]
        time.sleep(2)
        r2 = self.row(base)
        if r2["status"] != "paused":
            raise StepFailed(f"{base} left the paused state by itself: {r2['status']}")
        self.click_in_row(base, "Resume")
        self.wait(f"{base} resumed", lambda: (lambda r: r and r["status"] in ("active", "waiting", "complete"))(self.row(base)),
                  timeout=30)
        self.shot("resumed")
        r = self.wait(f"{base} to complete after resume",
                      lambda: (lambda r: r if r and r["status"] == "complete" and r["value"] == 100 else None)(self.row(base)),
                      timeout=self.args.timeout)
        path = self.out_path(name)
        self.wait(f"{path} on disk", lambda: os.path.isfile(path), timeout=10)
        got = sha256_of(path)
        if got != sha:
            raise StepFailed(f"{path}: sha256 {got}, expected {sha}")
        return f"{base}: paused at {at_pause} %, resumed, complete, sha256 identical"

    def step_remove(self):
        name, _ = parse_file(self.args.remove)
        base = os.path.basename(name)
        self.add(self.file_url(name), split=1)
        self.wait(f"{base} downloading", lambda: (lambda r: r and r["status"] == "active")(self.row(base)), timeout=60)
        self.click_in_row(base, "Remove")
        self.wait(f"{base} gone from the page", lambda: self.row(base) is None, timeout=30)
        time.sleep(1.5)  # and it stays gone over the next updates
        if self.row(base) is not None:
            raise StepFailed(f"{base} came back after removal: {self.row(base)}")
        self.shot("removed")
        return f"{base} removed"

    def step_retry(self):
        """A URL that fails (404) shows its error; once the file exists, Retry fetches it."""
        name, sha = parse_file(self.args.late)
        base = os.path.basename(name)
        self.add(self.file_url(name))
        r = self.wait(f"{base} to fail", lambda: (lambda r: r if r and r["status"] == "error" else None)(self.row(base)),
                      timeout=60)
        if not r["error"].strip():
            raise StepFailed(f"the failed download shows no error message: {r}")
        if r["badge"] != "Failed" or "Retry" not in [b["name"] for b in r["buttons"]]:
            raise StepFailed(f"a failed download has no 'Failed' status or no Retry button: {r}")
        self.shot("failed")
        shutil.copyfile(os.path.join(self.args.www, self.args.late_source), os.path.join(self.args.www, name))
        self.click_in_row(base, "Retry")
        self.wait(f"{base} to complete after Retry",
                  lambda: (lambda r: r if r and r["status"] == "complete" and r["value"] == 100 else None)(self.row(base)),
                  timeout=self.args.timeout)
        count = self.js("return [...document.querySelectorAll('li.dl .dl-name')].filter((n) => n.textContent === arguments[0]).length;", base)
        if count != 1:
            raise StepFailed(f"{count} rows for {base} after Retry (the failed one should be gone)")
        path = self.out_path(name)
        self.wait(f"{path} on disk", lambda: os.path.isfile(path), timeout=10)
        got = sha256_of(path)
        if got != sha:
            raise StepFailed(f"{path}: sha256 {got}, expected {sha}")
        return f"{base}: error shown ({r['error'].strip()!r}), Retry completed it, sha256 identical"

    def step_escaping(self):
        """A server-chosen name that is HTML stays text: shown as typed, never run."""
        url = self.file_url("missing-%3Cimg%20src%3Dx%20onerror%3D%22window.__xss%3D1%22%3E.bin")
        self.add(url)
        find = ("for (const li of document.querySelectorAll('li.dl')) {"
                " const n = li.querySelector('.dl-name').textContent;"
                " if (n.startsWith('missing-')) return {name: n, status: li.dataset.status,"
                " imgs: li.querySelectorAll('img').length}; } return null;")
        r = self.wait("the download with an HTML name to fail",
                      lambda: (lambda r: r if r and r["status"] == "error" else None)(self.js(find)), timeout=60)
        if r["imgs"] or self.js("return window.__xss !== undefined;"):
            raise StepFailed(f"a file name was parsed as HTML: {r}")
        if "<img" not in r["name"]:
            raise StepFailed(f"the name is not shown as text: {r['name']!r}")
        self.click_in_row(r["name"], "Remove")
        self.wait("it gone", lambda: self.js(find) is None, timeout=30)
        return f"shown as text: {r['name']!r}"

    def step_reorder(self):
        """Two paused downloads swap places in the queue with Move down."""
        names = []
        for spec in self.args.queue:
            name, _ = parse_file(spec)
            names.append(os.path.basename(name))
            self.add(self.file_url(name), split=1)
        for base in names:
            self.wait(f"{base} listed", lambda b=base: self.row(b) is not None, timeout=30)
            self.click_in_row(base, "Pause")
            self.wait(f"{base} paused", lambda b=base: (self.row(b) or {}).get("status") == "paused", timeout=30)
        order_js = ("return [...document.querySelectorAll('#waiting-list li.dl .dl-name')]"
                    ".map((n) => n.textContent).filter((n) => arguments[0].includes(n));")
        before = self.wait("both in the queue", lambda: (lambda o: o if len(o) == 2 else None)(self.js(order_js, names)),
                           timeout=20)
        self.click_in_row(before[0], "Move down")
        after = self.wait("the order to change", lambda: (lambda o: o if o == before[::-1] else None)(self.js(order_js, names)),
                          timeout=20)
        self.shot("reordered")
        for base in names:
            self.click_in_row(base, "Remove")
            self.wait(f"{base} gone", lambda b=base: self.row(b) is None, timeout=30)
        return f"{before} → {after}"

    def step_clear_finished(self):
        self.button("Clear finished").click()
        self.wait("the finished list empty",
                  lambda: self.js("return document.querySelectorAll('#stopped-list li').length === 0;"), timeout=20)
        self.shot("cleared")
        return "finished list empty"

    def step_speed_limit(self):
        self.fill("limit", "2M")
        self.button("Set limit").click()
        self.wait("the limit shown as 2 MiB/s", lambda: "2.00 MiB/s" in (self.text_of("limit-now") or ""), timeout=10)
        time.sleep(2.5)  # the daemon's next updates still say so
        now = self.text_of("limit-now")
        if "2.00 MiB/s" not in now:
            raise StepFailed(f"the daemon did not keep the limit: {now!r}")
        self.shot("speed-limit")
        self.fill("limit", "0")
        self.button("Set limit").click()
        self.wait("the limit removed", lambda: "none" in (self.text_of("limit-now") or ""), timeout=10)
        return "limit set to 2M and back to none"

    def start_extra(self):
        """A slow download kept active while the layout is photographed (its segment map shows)."""
        if not self.args.extra:
            return None
        name, _ = parse_file(self.args.extra)
        base = os.path.basename(name)
        self.add(self.file_url(name), split=4)
        self.wait(f"{base} downloading", lambda: (lambda r: r and r["status"] == "active" and (r["value"] or 0) > 0)(self.row(base)),
                  timeout=60)
        return base

    def step_narrow(self):
        self.driver.set_window_size(*NARROW)
        width = self.wait("a 360 px viewport", lambda: self.js("return window.innerWidth;") <= NARROW[0] and self.js("return window.innerWidth;"), timeout=5)
        time.sleep(1.2)
        overflow = self.js("return document.documentElement.scrollWidth;")
        if overflow > width + 1:
            raise StepFailed(f"the page is {overflow} px wide in a {width} px window (scrolls sideways)")
        # Buttons stay at least 32 px tall, text fits its boxes.
        small = self.js(
            "return [...document.querySelectorAll('button')].filter((b) => b.offsetParent !== null"
            " && b.getBoundingClientRect().height < 30).map((b) => b.textContent);"
        )
        if small:
            raise StepFailed(f"buttons too small to tap at 360 px: {small}")
        self.shot("narrow-360")
        return f"{width} px: no sideways scrolling"

    def step_dark(self):
        self.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
        )
        time.sleep(1.2)
        bg = self.js("return getComputedStyle(document.documentElement).backgroundColor;")
        rgb = [int(x) for x in bg[bg.index("(") + 1:bg.index(")")].split(",")[:3]]
        luminance = (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]) / 255
        if luminance > 0.3:
            raise StepFailed(f"the dark scheme is not dark: background {bg}")
        self.shot("dark-narrow-360")
        self.driver.set_window_size(*DESKTOP)
        time.sleep(1.2)
        self.shot("dark-desktop")
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        time.sleep(0.5)
        self.shot("light-desktop")
        return f"background {bg}"

    def finish_extra(self, base):
        if base and self.row(base) is not None:
            self.click_in_row(base, "Remove")
            self.wait(f"{base} gone", lambda: self.row(base) is None, timeout=30)

    # --------------------------------------------------------------------- run
    def run_step(self, label, fn, needs_sign_in=True):
        if needs_sign_in and not self.signed_in:
            self.failed += 1
            print(f"FAIL {label}: skipped, not signed in", flush=True)
            return
        try:
            detail = fn()
            self.passed += 1
            print(f"ok   {label}: {detail}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
            self.failed += 1
            path = self.shot(f"FAILED-{label.replace(' ', '-')}")
            msg = str(e) if isinstance(e, StepFailed) else "".join(traceback.format_exception_only(type(e), e)).strip()
            print(f"FAIL {label}: {msg} (screenshot {path})", flush=True)
            self.print_console()

    def print_console(self):
        try:
            for entry in self.driver.get_log("browser")[-10:]:
                print(f"     | console {entry.get('level')}: {entry.get('message')}", flush=True)
        except Exception:  # noqa: BLE001 - logs are a courtesy
            pass

    def step_open_without_secret(self):
        self.driver.get(self.args.page)
        self.wait("the downloads, with no sign-in (the daemon has no secret)", lambda: self.visible("app"), timeout=20)
        if self.visible("signin"):
            raise StepFailed("the sign-in form is shown by a daemon without a secret")
        self.signed_in = True
        self.shot("no-secret")
        return "the page works with no secret"

    def run(self):
        if self.args.no_secret:
            try:
                self.run_step("open without a secret", self.step_open_without_secret, needs_sign_in=False)
                self.run_step("add and complete", self.step_add_complete)
                self.run_step("pause and resume", self.step_pause_resume)
                self.run_step("remove", self.step_remove)
            finally:
                self.driver.quit()
                shutil.rmtree(self.profile, ignore_errors=True)
            print(f"{self.passed} passed, {self.failed} failed", flush=True)
            return 0 if self.failed == 0 else 1
        try:
            self.run_step("wrong secret", self.step_wrong_secret, needs_sign_in=False)
            self.run_step("sign in", self.step_sign_in, needs_sign_in=False)
            self.run_step("add and complete", self.step_add_complete)
            self.run_step("pause and resume", self.step_pause_resume)
            self.run_step("remove", self.step_remove)
            if self.args.late:
                self.run_step("failed and retried", self.step_retry)
            self.run_step("names are text", self.step_escaping)
            if self.args.queue:
                self.run_step("reorder the queue", self.step_reorder)
            self.run_step("speed limit", self.step_speed_limit)
            extra = None
            try:
                extra = self.start_extra() if self.signed_in else None
            except Exception as e:  # noqa: BLE001 - the layout steps still run without it
                print(f"note: no active download for the layout screenshots: {e}", flush=True)
            self.run_step("360 px layout", self.step_narrow)
            self.run_step("dark scheme", self.step_dark)
            try:
                self.finish_extra(extra)
            except Exception as e:  # noqa: BLE001
                print(f"note: could not remove the extra download: {e}", flush=True)
            self.run_step("clear finished", self.step_clear_finished)
        finally:
            self.driver.quit()
            shutil.rmtree(self.profile, ignore_errors=True)
        print(f"dashboard: screenshots in {self.args.shots}", flush=True)
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 0 if self.failed == 0 else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--page", required=True, help="the dashboard's URL, e.g. http://127.0.0.1:6800/")
    p.add_argument("--secret", help="the daemon's --rpc-secret")
    p.add_argument("--no-secret", action="store_true",
                   help="the daemon has no secret: open the page (no sign-in), add, pause and resume, remove")
    p.add_argument("--files", required=True, help="base URL of the test files (nginx)")
    p.add_argument("--out-dir", required=True, help="the daemon's download directory (-d)")
    p.add_argument("--fast", required=True, help="PATH=SHA256 of a file served at full speed")
    p.add_argument("--slow", required=True, help="PATH=SHA256 of a rate-limited file (paused and resumed)")
    p.add_argument("--remove", required=True, help="PATH of a rate-limited file (removed)")
    p.add_argument("--extra", help="PATH of a rate-limited file kept active for the layout screenshots")
    p.add_argument("--www", help="nginx's root (for --late: the file is put there after the first try fails)")
    p.add_argument("--late", help="PATH=SHA256 of a file missing at first (404); copied from --late-source, then retried")
    p.add_argument("--late-source", help="the file under --www that becomes --late")
    p.add_argument("--queue", action="append", help="PATH of a rate-limited file for the reorder step (give two)")
    p.add_argument("--shots", default=".build/dashboard-screenshots", help="where screenshots go")
    p.add_argument("--expect-push", action="store_true",
                   help="require the daemon's push (downpour.subscribe), not the polling fallback")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a download to finish")
    args = p.parse_args()
    if not args.no_secret and not args.secret:
        p.error("--secret is needed (or --no-secret)")
    sys.exit(Test(args).run())


if __name__ == "__main__":
    main()
