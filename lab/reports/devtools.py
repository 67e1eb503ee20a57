"""One page in headless Chromium, driven over the DevTools protocol with the standard
library only. The protocol runs over a pipe (--remote-debugging-pipe: Chromium reads
commands from its fd 3 and writes replies and events to its fd 4, each a JSON text
ended by a NUL byte), so there is no port and no WebSocket. Chromium is launched as
lab.reports.browser launches it (its flags, a throwaway profile).

    with Page(url) as page:
        page.wait_for("document.body.dataset.state === 'live'")
        page.evaluate("...")          # a JavaScript expression's value
        page.screenshot(path)         # PNG of the whole page
        page.fail_requests("*/x*")    # requests whose URL matches fail, until
        page.fail_requests(None)      # this; meanwhile page.pump() answers them
        page.exceptions, page.requests  # uncaught script errors; every URL the page asked for
"""

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

from ..base.common import SetupError
from . import browser


def high_pipe():
    """os.pipe() with both ends at fd 10 or above: clear of the 3 and 4 they go to."""
    ends = []
    for fd in os.pipe():
        ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    return ends


class DevToolsError(Exception):
    """Chromium answered a command with an error, or a script threw."""


class Page:
    def __init__(self, url, size=(1280, 720), timeout=20):
        self.url, self.size, self.timeout = url, size, timeout
        self.proc, self.profile, self.log, self.session = None, None, None, None
        self.commands = self.replies = None  # our ends of the two pipes
        self.next_id = 0
        self.buffer = b""
        self.exceptions, self.requests = [], []
        self.failing = False

    # ------------------------------------------------------------- lifetime

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        self.profile = tempfile.mkdtemp(prefix="lab-chromium.")
        to_chromium, self.commands = high_pipe()
        self.replies, from_chromium = high_pipe()
        cmd = browser.command(browser.binary(), self.profile, ["--remote-debugging-pipe"],
                              "about:blank", f"{self.size[0]},{self.size[1]}")
        # bash puts the pipe's ends on the fds Chromium expects, then becomes Chromium
        wrapper = ["bash", "-c", f'exec "$@" 3<&{to_chromium} 4>&{from_chromium} '
                   f'{to_chromium}<&- {from_chromium}>&-', "chromium"] + cmd
        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        self.proc = subprocess.Popen(wrapper, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, pass_fds=(to_chromium, from_chromium),
                                     start_new_session=True)
        os.close(to_chromium)
        os.close(from_chromium)
        pages = [t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        if not pages:
            raise SetupError("headless Chromium opened no page")
        self.session = self.call("Target.attachToTarget", targetId=pages[0]["targetId"],
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(domain + ".enable")
        # the window has a minimum width; a phone's viewport is emulated
        self.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1],
                  deviceScaleFactor=1, mobile=self.size[0] < 700)
        self.call("Page.navigate", url=self.url)
        self.wait_event("Page.loadEventFired")

    def close(self):
        """Closes the browser (or kills the process group it was started in)."""
        if self.proc and self.proc.poll() is None:
            try:
                self.send("Browser.close", {}, None)
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for fd in (self.commands, self.replies):
            if fd is not None:
                os.close(fd)
        self.commands = self.replies = None
        if self.log:
            self.log.close()
            self.log = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def chromium_log(self):
        try:
            with open(os.path.join(self.profile, "chromium.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")[-600:]
        except (OSError, TypeError):
            return ""

    # ------------------------------------------------------------ messages

    def send(self, method, params, session):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.commands, data):]
        return self.next_id

    def receive(self, deadline):
        """The next message from Chromium, or None when none came before `deadline`."""
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                return None
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                raise SetupError("headless Chromium exited; its log:\n" + self.chromium_log())
            self.buffer += chunk
        text, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(text)

    def handle(self, message):
        """An event: remember what the checks need, answer paused requests."""
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            self.exceptions.append((d.get("exception") or {}).get("description") or d.get("text"))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Fetch.requestPaused":
            if self.failing:
                self.send("Fetch.failRequest", {"requestId": params["requestId"],
                                                "errorReason": "ConnectionRefused"}, self.session)
            else:
                self.send("Fetch.continueRequest", {"requestId": params["requestId"]},
                          self.session)

    def expect(self, deadline, what):
        message = self.receive(deadline)
        if message is None:
            raise SetupError(f"headless Chromium: no {what} within {self.timeout} s; its log:\n"
                             + self.chromium_log())
        return message

    def call(self, method, **params):
        """Sends a command (to the page once attached) and returns its result."""
        wanted = self.send(method, params, self.session)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self.expect(deadline, f"answer to {method}")
            if message.get("id") == wanted:
                if "error" in message:
                    raise DevToolsError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            self.handle(message)

    def wait_event(self, method):
        deadline = time.monotonic() + self.timeout
        while True:
            message = self.expect(deadline, method)
            self.handle(message)
            if message.get("method") == method:
                return message.get("params", {})

    def pump(self, seconds):
        """Handles events for `seconds` (time for the page to run)."""
        deadline = time.monotonic() + seconds
        message = self.receive(deadline)
        while message is not None:
            self.handle(message)
            message = self.receive(deadline)

    # ---------------------------------------------------------------- page

    def evaluate(self, expression):
        """The JSON value of a JavaScript expression (awaited when it is a promise)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise DevToolsError((d.get("exception") or {}).get("description") or d.get("text"))
        return r["result"].get("value")

    def wait_for(self, expression, seconds):
        """The expression's first truthy value within `seconds`, else None."""
        deadline = time.monotonic() + seconds
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() >= deadline:
                return value or None
            self.pump(0.2)

    def fail_requests(self, pattern):
        """Requests whose URL matches `pattern` fail as if nothing answered; None: no more."""
        self.failing = pattern is not None
        if pattern:
            self.call("Fetch.enable", patterns=[{"urlPattern": pattern}])
        else:
            self.call("Fetch.disable")

    def screenshot(self, path):
        """A PNG of the whole page, as wide as the window."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": self.size[0],
                "height": max(self.size[1], int(size["height"])), "scale": 1}
        png = self.call("Page.captureScreenshot", format="png", clip=clip,
                        captureBeyondViewport=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))
        return path
