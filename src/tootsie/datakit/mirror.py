"""Mirror step: copy one file from any fsspec URL (http, s3, gs, local) into the prefix, checksummed.

Data from outside (a tokenizer, an eval set, a WARC) enters an experiment as a
step whose output is a copy, so later steps read the prefix, never the
network, and the copy is pinned. The config holds the source URL and the
expected sha256 or a revision (an ETag, a version id, a release tag): both are
hashed, so a changed source gets a new output path rather than overwriting an
old copy. The bytes are streamed once, hashed as they are written to a
temporary name, checked, and renamed into place; `mirror.json` (url, sha256,
size, revision) is written last.

Example: `MirrorConfig(url="https://example.org/tokenizer.json",
sha256="9f86d0...")` writes `<step>/tokenizer.json` and a `mirror.json` with
`{"sha256": "9f86d0...", "size": 9085657, ...}`; if the server's file changed,
the step fails with both digests instead of storing it.
"""

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import fsspec

from tootsie.configfile import unhashed
from tootsie.errors import TootsieError
from tootsie.jsonfile import write_json_atomic

MIRROR_FILE = "mirror.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class MirrorConfig:
    """Where to copy from, and what the copy must be."""

    url: str
    """Source: any fsspec URL or local path (https://..., s3://bucket/key, gs://..., /data/file)."""
    sha256: str | None = None
    """Expected lowercase hex sha256 of the file; a mismatch fails the step."""
    revision: str | None = None
    """Source revision (ETag, version id, tag, date) when the digest is not known in advance."""
    filename: str | None = None
    """Name of the copy in the step's output; default the URL's last path segment."""
    chunk_bytes: int = unhashed(1 << 22)
    """Bytes read per chunk (4 MiB)."""

    def __post_init__(self) -> None:
        if self.sha256 is None and self.revision is None:
            raise ValueError(
                f"MirrorConfig for {self.url!r} pins nothing: give sha256= (the file's hex digest) or revision="
                " (an ETag, version or tag), so that a changed source gets a new output path"
            )
        if self.sha256 is not None and not _SHA256.fullmatch(self.sha256):
            raise ValueError(f"sha256={self.sha256!r} is not 64 lowercase hex digits; paste `sha256sum` output")
        if "/" in self.target or self.target in ("", ".", "..", MIRROR_FILE):
            raise ValueError(f"filename={self.target!r} must be one plain file name other than {MIRROR_FILE}")

    @property
    def target(self) -> str:
        """The copy's file name."""
        return self.filename if self.filename is not None else self.url.rstrip("/").rsplit("/", 1)[-1]


def mirror(config: MirrorConfig, output_path: str) -> dict[str, object]:
    """Step: stream `config.url` into `output_path/<target>`, check its sha256, record it in `mirror.json`."""
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{config.target}.tmp-{os.getpid()}"
    digest, size = hashlib.sha256(), 0
    try:
        with fsspec.open(config.url, "rb") as source, open(tmp, "wb") as copy:
            while chunk := source.read(config.chunk_bytes):
                digest.update(chunk)
                copy.write(chunk)
                size += len(chunk)
    except (OSError, ValueError) as error:
        tmp.unlink(missing_ok=True)
        raise TootsieError(f"cannot read {config.url}: {error}") from error
    actual = digest.hexdigest()
    if config.sha256 is not None and actual != config.sha256:
        tmp.unlink()
        raise TootsieError(
            f"{config.url} has sha256 {actual} ({size} bytes) but the config expects {config.sha256}; the source"
            " changed or is damaged: check it, then set sha256 to the new digest (a new output path)"
        )
    tmp.replace(out / config.target)
    record = {"url": config.url, "file": config.target, "sha256": actual, "size": size, "revision": config.revision}
    write_json_atomic(out / MIRROR_FILE, record)
    return record
