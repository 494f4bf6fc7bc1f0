"""The mirror step copies http://, s3:// (a local moto server) and local files into the prefix, checksummed.

Traffic goes only to the HTTP and moto servers this module starts on 127.0.0.1.
"""

import functools
import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")

import fsspec  # noqa: E402 - after the skips: s3fs and moto are optional

from tests.executor.s3_server import moto_s3  # noqa: E402
from tootsie.datakit.mirror import MIRROR_FILE, MirrorConfig, mirror  # noqa: E402
from tootsie.errors import TootsieError  # noqa: E402
from tootsie.executor import Status, Step, run_experiment  # noqa: E402
from tootsie.executor.graph import output_path  # noqa: E402

PAYLOAD = bytes(range(256)) * 1200 + "café ☕\n".encode()
"""307 KB: several chunks at the tests' 64 KiB chunk size."""
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No request log on stderr."""


@pytest.fixture(scope="module")
def http_root(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A local HTTP server over a fresh directory: (base URL, directory)."""
    root = tmp_path_factory.mktemp("www")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    thread.join(timeout=10)
    server.server_close()


def test_http_copy_is_byte_identical_with_its_checksum_and_size(http_root, tmp_path) -> None:
    base, root = http_root
    (root / "data.bin").write_bytes(PAYLOAD)
    step = Step("mirror/data", mirror, MirrorConfig(url=f"{base}/data.bin", sha256=DIGEST, chunk_bytes=1 << 16))
    report = run_experiment([step], tmp_path / "prefix")
    assert report.ok and [s.status for s in report.steps] == [Status.SUCCESS]
    out = Path(output_path(step, tmp_path / "prefix"))
    assert (out / "data.bin").read_bytes() == PAYLOAD
    record = json.loads((out / MIRROR_FILE).read_text())
    assert record == {
        "url": f"{base}/data.bin",
        "file": "data.bin",
        "sha256": DIGEST,
        "size": len(PAYLOAD),
        "revision": None,
    }
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".executor")) == ["data.bin", MIRROR_FILE]


def test_a_checksum_mismatch_names_the_url_and_both_digests(http_root, tmp_path) -> None:
    base, root = http_root
    (root / "changed.bin").write_bytes(PAYLOAD + b"!")
    wrong = hashlib.sha256(PAYLOAD + b"!").hexdigest()
    with pytest.raises(TootsieError) as error:
        mirror(MirrorConfig(url=f"{base}/changed.bin", sha256=DIGEST), str(tmp_path / "out"))
    assert f"{base}/changed.bin" in str(error.value) and DIGEST in str(error.value) and wrong in str(error.value)
    assert list((tmp_path / "out").iterdir()) == []  # neither the copy nor its temporary is left


def test_a_missing_source_is_a_clear_error(http_root, tmp_path) -> None:
    base, _ = http_root
    with pytest.raises(TootsieError, match=f"cannot read {base}/absent.bin"):
        mirror(MirrorConfig(url=f"{base}/absent.bin", revision="v1"), str(tmp_path / "out"))


def test_s3_source_on_moto_pinned_by_revision(tmp_path) -> None:
    import s3fs

    with moto_s3() as env, pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        patch.setitem(fsspec.config.conf, "s3", {"endpoint_url": env["AWS_ENDPOINT_URL"]})
        s3fs.S3FileSystem.clear_instance_cache()
        bucket = f"tootsie-{uuid.uuid4().hex[:12]}"
        fs = fsspec.filesystem("s3")
        fs.mkdir(bucket)
        fs.pipe(f"{bucket}/corpora/a.jsonl", PAYLOAD)
        record = mirror(
            MirrorConfig(url=f"s3://{bucket}/corpora/a.jsonl", revision="2026-11-24", filename="corpus.jsonl"),
            str(tmp_path / "out"),
        )
        s3fs.S3FileSystem.clear_instance_cache()
    assert (tmp_path / "out" / "corpus.jsonl").read_bytes() == PAYLOAD
    assert (record["sha256"], record["size"], record["revision"]) == (DIGEST, len(PAYLOAD), "2026-11-24")


def test_local_source_and_pins_in_the_output_path(tmp_path) -> None:
    source = tmp_path / "src" / "tok.json"
    source.parent.mkdir()
    source.write_bytes(PAYLOAD)
    assert mirror(MirrorConfig(url=str(source), sha256=DIGEST), str(tmp_path / "out"))["size"] == len(PAYLOAD)
    assert (tmp_path / "out" / "tok.json").read_bytes() == PAYLOAD

    def path(**pins: str) -> str:
        return output_path(Step("mirror/tok", mirror, MirrorConfig(url=str(source), **pins)), tmp_path)

    paths = {path(sha256=DIGEST), path(sha256="0" * 64), path(revision="a"), path(revision="b")}
    assert len(paths) == 4  # a changed source (new digest or revision) gets a new output path
    assert path(revision="a") == output_path(
        Step("mirror/tok", mirror, MirrorConfig(url=str(source), revision="a", chunk_bytes=1)), tmp_path
    )  # the chunk size is not part of the identity


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "pins nothing"),
        ({"sha256": "ABC"}, "64 lowercase hex"),
        ({"revision": "1", "filename": MIRROR_FILE}, "one plain file name"),
    ],
)
def test_config_refuses_what_it_cannot_pin(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        MirrorConfig(url="https://example.org/x.bin", **kwargs)
