"""A real headless Chromium, driven over the DevTools protocol (tornado's websocket client), for the
test that opens the Snakemake report: load a page, run JavaScript in it, take a screenshot.

Chromium is a system package (Debian: `apt-get install chromium`, which .ci/run does); without it the
tests that need it are skipped with that message.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from tornado.websocket import websocket_connect

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
MISSING = ("no Chromium found (tried " + ", ".join(CHROMIUM_NAMES) + "): the report is not checked in a browser; "
           "install it with `apt-get install chromium` (what .ci/run does)")


def chromium_executable() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


class HeadlessChromium:
    """``with HeadlessChromium(profile_dir) as browser: browser.open(url); browser.evaluate(js)``."""

    def __init__(self, profile_dir: Path, width: int = 1400, height: int = 1000, timeout: float = 60):
        self.profile_dir, self.timeout = Path(profile_dir), timeout
        self.size = (width, height)
        self.loop = asyncio.new_event_loop()
        self.messages = 0

    def __enter__(self) -> HeadlessChromium:
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [chromium_executable(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile_dir}",
             f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile_dir / "DevToolsActivePort"  # Chromium writes its port here once listening
        deadline = time.time() + self.timeout
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if time.time() > deadline or self.process.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"Chromium did not start (exit code {self.process.poll()})")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout) as response:
            page = next(target for target in json.load(response) if target["type"] == "page")

        async def connect():
            return await websocket_connect(page["webSocketDebuggerUrl"], max_message_size=256 * 2**20)

        self.socket = self.loop.run_until_complete(connect())
        return self

    def __exit__(self, *exc) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.loop.close()

    def call(self, method: str, **params) -> dict:
        """One DevTools protocol command; its result."""
        self.messages += 1
        message_id = self.messages

        async def exchange():
            await self.socket.write_message(json.dumps({"id": message_id, "method": method, "params": params}))
            while True:
                reply = await self.socket.read_message()
                if reply is None:
                    raise RuntimeError("Chromium closed the DevTools connection")
                reply = json.loads(reply)
                if reply.get("id") == message_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]

        return self.loop.run_until_complete(asyncio.wait_for(exchange(), self.timeout))

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str):
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.time() + self.timeout
        while not (value := self.evaluate(expression)):
            if time.time() > deadline:
                raise TimeoutError(f"the page never showed {what} ({expression})")
            time.sleep(0.2)
        return value

    def click_text(self, text: str) -> None:
        """Click the innermost visible element whose text is exactly ``text`` (the click bubbles up to the
        element that handles it, as a user's does)."""
        self.wait_for(f"""(() => {{
            const hits = [...document.querySelectorAll('body *')].filter(e => e.textContent.trim() === {json.dumps(text)}
                && e.getClientRects().length && ![...e.children].some(c => c.textContent.trim() === {json.dumps(text)}));
            if (!hits.length) return false;
            hits[0].click();
            return true;
        }})()""", f"an element reading {text!r}")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", "a loaded document")

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return path
