"""A report checked in a real browser: headless Chromium (no network, throwaway
profile) renders the page; its DOM must hold the table with one row per result row,
every chart with its bars or lines, and a banner that agrees with the verdicts; a
screenshot is written beside the page. The page must load nothing from the network."""

import html.parser
import os
import re
import shutil
import subprocess
import tempfile

from ..base.common import SetupError


def binary():
    for name in filter(None, [os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                              "google-chrome", "google-chrome-stable"]):
        path = shutil.which(name)
        if path:
            return path
    raise SetupError("no chromium found (Debian: scripts/deps.sh chromium)")


def command(browser, profile, extra, url, size="1280,1600"):
    """Headless Chromium (as root too: no sandbox) with a throwaway profile and nothing
    of its own on the network: no updates, sync or background requests."""
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-quic", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-extensions", "--disable-default-apps", "--no-first-run",
            "--no-default-browser-check", "--mute-audio", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={size}"] + extra + [url]


def chromium(browser, profile, extra, url, timeout=90):
    return subprocess.run(command(browser, profile, extra, url), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


class Dom(html.parser.HTMLParser):
    """What the check needs from the rendered DOM."""

    def __init__(self, table_id):
        super().__init__()
        self.table_id = table_id
        self.in_table = False
        self.rows, self.verdicts = [], []
        self.charts = {}       # svg id -> {"bar": n, "series": n}
        self.in_svg = None
        self.gate = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "table" and a.get("id") == self.table_id:
            self.in_table = True
        elif tag == "tr" and self.in_table and "row" in classes:
            self.rows.append(a.get("data-label"))
            self.verdicts.append(a.get("data-verdict"))
        elif tag == "svg":
            self.in_svg = a.get("id")
            self.charts.setdefault(self.in_svg, {"bar": 0, "series": 0})
        elif tag == "g" and self.in_svg:
            for kind in ("bar", "series"):
                if kind in classes:
                    self.charts[self.in_svg][kind] += 1
        if a.get("id") == "gate":
            self.gate = "pass" if "pass" in classes else "fail"

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_table = False
        elif tag == "svg":
            self.in_svg = None


NETWORK = re.compile(r"""(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//""")


def problems(source, dom_text, expect):
    """What is wrong with a page, given its source, its rendered DOM and what it must
    hold: {"table": id, "rows": [labels], "charts": {id: ("bar"|"series", count)}}."""
    found = []
    if NETWORK.search(source):
        found.append("the page loads something from the network (it must be self-contained)")
    dom = Dom(expect["table"])
    dom.feed(dom_text)
    if not dom.rows:
        found.append(f"no result rows in table#{expect['table']}")
    elif dom.rows != expect["rows"]:
        found.append(f"table rows {dom.rows} != result rows {expect['rows']}")
    for chart, (kind, count) in expect["charts"].items():
        if chart not in dom.charts:
            found.append(f"svg#{chart} missing")
        elif dom.charts[chart][kind] != count:
            found.append(f"svg#{chart} has {dom.charts[chart][kind]} {kind} elements, "
                         f"expected {count}")
    if dom.gate is None:
        found.append("no pass/fail banner (#gate)")
    elif dom.verdicts:
        want = "pass" if all(v == "pass" for v in dom.verdicts) else "fail"
        if dom.gate != want:
            found.append(f"banner says {dom.gate} but row verdicts are {dom.verdicts}")
    return found


def check(page, expect):
    """Render `page` in headless Chromium; [] when it is right, else the problems.
    SetupError when it cannot be checked (no browser, Chromium failing)."""
    page = os.path.realpath(page)
    shot = os.path.splitext(page)[0] + ".png"
    browser = binary()
    url = "file://" + page
    with tempfile.TemporaryDirectory(prefix="lab-chromium.") as profile:
        try:
            dom = chromium(browser, profile, ["--dump-dom"], url)
            if os.path.exists(shot):
                os.unlink(shot)
            pic = chromium(browser, profile, [f"--screenshot={shot}"], url)
        except subprocess.TimeoutExpired:
            raise SetupError("chromium did not finish in time") from None
    if dom.returncode != 0 or not dom.stdout.strip():
        raise SetupError(f"chromium --dump-dom failed (exit {dom.returncode}): "
                         + dom.stderr.decode("utf-8", "replace").strip()[-300:])
    with open(page, encoding="utf-8", errors="replace") as f:
        found = problems(f.read(), dom.stdout.decode("utf-8", "replace"), expect)
    if pic.returncode != 0 or not os.path.isfile(shot) or os.path.getsize(shot) < 10000:
        found.append(f"no screenshot written (chromium exit {pic.returncode})")
    return found
