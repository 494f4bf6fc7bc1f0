"""The dashboard's HTTP server: the page, its static files and a JSON API, from the standard library alone.

Routes (GET only):
- `/` the page; `/static/<name>` its script, style and the vendored uPlot,
  read once at start from the package's `static/` folder (nothing else on
  disk is ever served as a file);
- `/api/runs` → `[{"id", "path", "status", "step", "tokens", "loss", ...}]`;
- `/api/runs/<id>/metrics?since=STEP` → the run's records after STEP (all of
  them for `since=-1`), with the index's revision in the `X-Tootsie-Revision`
  header (a rewritten file bumps it: fetch from -1 again);
- `/api/signals` → the named signals and what each is (`monitor.signals`,
  the definitions the report plots too).

Unknown paths and run ids are 404, a bad `since` is 400. A server bound to a
loopback address also refuses requests whose Host header is not a loopback
name (a web page cannot reach it through DNS rebinding).
"""

import json
import logging
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, unquote, urlsplit

from tootsie.monitor.signals import SCALAR_SIGNALS
from tootsie.report.dashboard.registry import RunRegistry

logger = logging.getLogger(__name__)

STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
"""Content types of the static files by suffix; files of other types in `static/` are not served."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
RUNS_PREFIX, METRICS_SUFFIX = "/api/runs/", "/metrics"


def static_files() -> dict[str, tuple[bytes, str]]:
    """URL path → (bytes, content type) of the page and everything under the package's `static/` folder."""
    files: dict[str, tuple[bytes, str]] = {}
    pending = [(resources.files("tootsie.report.dashboard") / "static", "/static")]
    while pending:
        folder, url = pending.pop()
        for entry in folder.iterdir():
            if entry.is_dir():
                pending.append((entry, f"{url}/{entry.name}"))
                continue
            suffix = entry.name[entry.name.rfind(".") :] if "." in entry.name else ""
            if suffix in STATIC_TYPES or entry.name == "LICENSE":
                files[f"{url}/{entry.name}"] = (entry.read_bytes(), STATIC_TYPES.get(suffix, STATIC_TYPES[".txt"]))
    files["/"] = files["/static/index.html"]
    return files


def _handler(registry: RunRegistry, files: dict[str, tuple[bytes, str]], loopback: bool) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "tootsie-dashboard"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            logger.debug("%s " + format, self.address_string(), *args)

        def _send(
            self, status: HTTPStatus, body: bytes, content_type: str, headers: tuple[tuple[str, str], ...] = ()
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: HTTPStatus, message: str) -> None:
            self._send(status, json.dumps({"error": message}).encode(), "application/json")

        def _json(self, payload: object) -> None:
            self._send(HTTPStatus.OK, json.dumps(payload).encode(), "application/json")

        def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            if loopback and host not in LOOPBACK_HOSTS:
                return self._error(HTTPStatus.FORBIDDEN, f"Host {host!r} is not this machine; open the printed URL")
            url = urlsplit(self.path)
            path = unquote(url.path)
            if path in files:
                return self._send(HTTPStatus.OK, *files[path])
            if path == "/api/runs":
                return self._json(registry.rows())
            if path == "/api/signals":
                return self._json(SCALAR_SIGNALS)
            if path.startswith(RUNS_PREFIX) and path.endswith(METRICS_SUFFIX):
                return self._metrics(path[len(RUNS_PREFIX) : -len(METRICS_SUFFIX)], parse_qs(url.query))
            return self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")

        def _metrics(self, run_id: str, query: dict[str, list[str]]) -> None:
            text = query.get("since", ["-1"])[-1]
            try:
                since = int(text)
            except ValueError:
                return self._error(HTTPStatus.BAD_REQUEST, f"since={text!r} is not a step; pass an integer, -1 for all")
            found = registry.metrics(run_id, since)
            if found is None:
                return self._error(HTTPStatus.NOT_FOUND, f"no run {run_id!r}; GET /api/runs lists the runs")
            revision, body = found
            self._send(HTTPStatus.OK, body, "application/json", (("X-Tootsie-Revision", str(revision)),))

    return Handler


@dataclass(frozen=True)
class Dashboard:
    """A started dashboard server: its URL, and `close()` to stop it."""

    server: ThreadingHTTPServer
    thread: threading.Thread | None

    @property
    def url(self) -> str:
        """The page's address (the bound port, so port 0 reports the one the system chose)."""
        host, port = self.server.server_address[:2]
        return f"http://{f'[{host}]' if ':' in str(host) else host}:{port}/"

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        if self.thread is not None:
            self.thread.join(timeout=10)


def make_server(registry: RunRegistry, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    """A threading HTTP server for `registry`'s runs bound to host:port (port 0: a free one); not yet serving."""
    loopback = host in LOOPBACK_HOSTS or host.startswith("127.")
    server = ThreadingHTTPServer((host, port), _handler(registry, static_files(), loopback))
    server.daemon_threads = True
    return server


def start_in_thread(registry: RunRegistry, host: str = "127.0.0.1", port: int = 0) -> Dashboard:
    """Serve in a background thread (tests, notebooks); the caller closes it."""
    server = make_server(registry, host, port)
    thread = threading.Thread(target=server.serve_forever, args=(0.1,), name="tootsie-dashboard", daemon=True)
    thread.start()
    return Dashboard(server, thread)
