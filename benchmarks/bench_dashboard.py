"""The live dashboard's footprint: page size and load time, server memory with 10 runs of 10k steps.

Writes `--runs` synthetic runs of `--steps` steps under a temporary root, each
`metrics.jsonl` shaped like the demo's records (loss, grad/update norms, 4
per-layer update norms, Adam moment norms, lm_head norm, LR and phase,
tokens/s) with held-out BPB on 3 domains every 100 steps, then starts
`tootsie dashboard ROOT --port 0` in a subprocess and prints:

- the page's bytes as served (HTML + the page's JS and CSS + the vendored uPlot);
- the server's resident memory (VmRSS) once it has indexed every run at start,
  after every run's records were fetched once, and of the same command over
  an empty root (the interpreter and its imports);
- `/api/runs` and one run's full `metrics?since=-1` latency and size;
- in headless Chromium (when installed): DOMContentLoaded, load, and the
  time to the first plot (the page's `data-first-plot-ms`) with the runs the
  page charts by default (up to 8).

    python benchmarks/bench_dashboard.py --runs 10 --steps 10000
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tootsie.report.dashboard.server import static_files

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for the test suite's DevTools pipe client
from tests.report.devtools import DevTools  # noqa: E402

PAGE_FILES = (
    "/static/index.html",
    "/static/dashboard.js",
    "/static/dashboard.css",
    "/static/vendor/uPlot.iife.min.js",
    "/static/vendor/uPlot.min.css",
)


def write_run(directory: Path, steps: int, seed: int) -> int:
    """A run of `steps` demo-shaped records; returns the file's bytes."""
    directory.mkdir(parents=True)
    lines = []
    for step in range(steps):
        decay = math.exp(-step / 2000)
        wiggle = math.sin(step * 0.37 + seed)
        record = {
            "step": step,
            "adam/mu_norm": 0.15 + 0.4 * decay,
            "adam/nu_norm": 0.003 + 0.01 * decay,
            "grad_norm": 0.7 + 0.8 * decay + 0.05 * wiggle,
            "layer_update_norms": [0.2 + 0.01 * layer + 0.02 * wiggle for layer in range(4)],
            "lm_head_norm": 14.0 + 50 * (1 - decay),
            "loss": 3.5 + 4.5 * decay + 0.05 * wiggle + 0.02 * seed,
            "update_norm": 0.85 + 0.02 * wiggle,
            "z_loss": 60.0 + 20 * (1 - decay),
            "lr": 3e-3 * min(1.0, (step + 1) / 300),
            "phase": "warmup" if step < 300 else "stable",
            "batch_size": 16,
            "data_step": step,
            "tokens": 2048 * (step + 1),
            "tokens_per_s": 15000.0 + 500 * wiggle,
            "mfu": None,
            "step_seconds": 0.13,
        }
        if step % 100 == 99:
            record |= {f"eval/bpb/{name}": 2.0 + decay + 0.1 * i for i, name in enumerate(("code", "prose", "web"))}
        lines.append(json.dumps(record) + "\n")
    text = "".join(lines)
    (directory / "metrics.jsonl").write_text(text, encoding="utf-8")
    (directory / "config.json").write_text(json.dumps({"num_steps": steps, "model": {}}), encoding="utf-8")
    return len(text.encode())


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def start(root: Path) -> tuple[subprocess.Popen[str], str, float]:
    """`tootsie dashboard ROOT --port 0`: the process, its URL, and seconds until it printed the URL."""
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tootsie.cli.main import main; sys.exit(main())"]
        + ["dashboard", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = process.stdout.readline()
    if not line.startswith("serving "):
        process.kill()
        raise RuntimeError(f"tootsie dashboard did not start: {line!r}")
    return process, line.split()[1], time.perf_counter() - began


def fetch(url: str) -> tuple[bytes, float]:
    """The body of a GET and its seconds."""
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
    return body, time.perf_counter() - began


def stop(process: subprocess.Popen[str]) -> None:
    """End the server and wait for it."""
    process.terminate()
    process.wait(timeout=30)


def browser_load(url: str, profile: Path) -> dict[str, float] | None:
    """Navigation timings and time to the first plot in headless Chromium, None when it is not installed."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    browser = DevTools(chromium, profile)
    try:
        target = browser.call("Target.createTarget", url=url)["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        expression = (
            "document.body.dataset.firstPlotMs && JSON.stringify({first_plot_ms: Number(document.body.dataset"
            ".firstPlotMs), dom_content_loaded_ms: performance.getEntriesByType('navigation')[0]"
            ".domContentLoadedEventEnd, load_ms: performance.getEntriesByType('navigation')[0].loadEventEnd})"
        )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            answer = browser.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
            value = answer["result"].get("value")
            if value:
                return json.loads(value)
            time.sleep(0.1)
        raise RuntimeError("the page drew nothing in 600 s")
    finally:
        browser.close()


def main() -> None:
    """Write the runs, measure, print one line per figure and a JSON object last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    files = static_files()
    result: dict[str, object] = {
        "page_bytes": {path: len(files[path][0]) for path in PAGE_FILES},
        "load_average": os.getloadavg()[0],
    }
    result["page_bytes_total"] = sum(result["page_bytes"].values())
    with tempfile.TemporaryDirectory(prefix="bench_dashboard_") as temp:
        root, empty = Path(temp) / "runs", Path(temp) / "empty"
        empty.mkdir()
        sizes = [write_run(root / f"run-{i:02d}", args.steps, i) for i in range(args.runs)]
        result["metrics_bytes"] = sum(sizes)
        process, url, _ = start(empty)
        result["rss_mb_empty_root"] = rss_mb(process.pid)
        stop(process)
        process, url, started = start(root)
        try:
            result["start_seconds_with_index"] = started
            result["rss_mb_indexed"] = rss_mb(process.pid)
            body, seconds = fetch(url + "api/runs")
            result["api_runs_seconds"], result["runs_listed"] = seconds, len(json.loads(body))
            for i in range(args.runs):
                body, seconds = fetch(f"{url}api/runs/runs%2Frun-{i:02d}/metrics?since=-1")
                if i == 0:
                    result["one_run_all_records"] = {"bytes": len(body), "seconds": seconds}
            result["rss_mb_after_serving_every_run"] = rss_mb(process.pid)
            result["browser"] = browser_load(url, Path(temp) / "profile")
            result["rss_mb_after_page"] = rss_mb(process.pid)
        finally:
            stop(process)
    for key, value in result.items():
        print(f"{key}: {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
