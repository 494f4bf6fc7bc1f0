"""A local S3-compatible server (moto's server mode) for tests: started on 127.0.0.1, never a real cloud.

`moto_s3()` starts `python -m moto.server` on a free port of 127.0.0.1 and
yields the environment that points every S3 client at it: dummy credentials,
no AWS config files, `AWS_ENDPOINT_URL` (botocore) and
`FSSPEC_S3_ENDPOINT_URL` (fsspec's config, read when a process imports
fsspec; subprocesses inherit it). The caller applies the environment to this
process too, and sets `fsspec.config.conf["s3"]` since fsspec read its config
at import time.
"""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited with code {proc.returncode} before answering at {url}")
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not answer at {url} within {timeout:g} s") from None
            time.sleep(0.1)


@contextlib.contextmanager
def moto_s3(timeout: float = 60.0) -> Iterator[dict[str, str]]:
    """Run a moto S3 server for the block; yields the environment variables that point clients at it."""
    port = _free_port()
    url = f"http://{HOST}:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_up(url, proc, timeout)
        yield {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_ENDPOINT_URL": url,
            "FSSPEC_S3_ENDPOINT_URL": url,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
