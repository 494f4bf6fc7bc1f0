"""A headless Chromium driven over the DevTools protocol on a pipe, for the dashboard's browser test and benchmark.

`--remote-debugging-pipe` makes Chromium read commands on file descriptor 3 and
write answers on 4, each a JSON object ending in a NUL byte, so no websocket
client is needed; a shell hands it this process's pipes as those descriptors.
"""

import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

ANSWER_SECONDS = 120
"""Longest wait for one answer (a page load on a loaded 2-core machine takes seconds)."""


class DevTools:
    """A headless Chromium and the DevTools protocol over its pipe: send a command, wait for its answer."""

    def __init__(self, chromium: str, profile: Path) -> None:
        flags = [
            "--headless",
            "--no-sandbox",  # the tests run as root in containers, where Chromium's sandbox cannot start
            "--disable-gpu",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "--window-size=1400,1000",
            "about:blank",
        ]
        # The shell hands Chromium our pipes as fd 3 (commands in) and fd 4 (answers out).
        self.process = subprocess.Popen(
            ["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null', chromium, *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._next, self._buffer = 0, b""

    def call(self, method: str, session: str | None = None, **params: object) -> dict[str, object]:
        """Send one command and return its result (events arriving meanwhile are dropped)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params} | ({"sessionId": session} if session else {})
        self.process.stdin.write(json.dumps(message).encode() + b"\0")
        self.process.stdin.flush()
        deadline = time.monotonic() + ANSWER_SECONDS
        while True:
            while b"\0" not in self._buffer:
                ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
                chunk = os.read(self.process.stdout.fileno(), 1 << 20) if ready else b""
                if not chunk:
                    raise AssertionError(f"Chromium gave no answer to {method} (exit code {self.process.poll()})")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self._next:
                assert "error" not in answer, (method, answer)
                return answer["result"]

    def open_page(self, url: str) -> Callable[[str], object]:
        """Open `url` in a new tab; return a function evaluating a JavaScript expression there (its value)."""
        target = self.call("Target.createTarget", url=url)["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

        def evaluate(expression: str) -> object:
            return self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)["result"].get(
                "value"
            )

        return evaluate

    def close(self) -> None:
        """Close the browser (and kill it if it does not exit)."""
        try:
            self.call("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        finally:
            self.process.stdin.close()
            self.process.stdout.close()
