"""An incremental index of a growing `metrics.jsonl`: read each new byte once, serve records by step.

A run being watched appends a line per step, so every refresh reads only the
bytes after the last complete line it indexed (a line still being written
waits for its newline). The index keeps three integer arrays per run, the byte
span and step of every parseable record, about 24 bytes a record, instead of
the records themselves; serving `since=STEP` reads those spans back from the
file, which is already valid JSON, so nothing is parsed twice.

The trainer rewrites the file (temp name, then rename) when it resumes or
rewinds, dropping the records after the resume step. A new inode, or a file
shorter than what was indexed, starts the index over and bumps `revision`, so
a client holding the old records knows to fetch them all again.

Example: after lines for steps 0..9 the index holds 10 spans; `since=7` serves
`[{step 8}, {step 9}]`; a rewind to step 4 rewrites the file with steps 0..3,
the next refresh re-reads it (revision 1) and `since=-1` serves steps 0..3.
"""

import json
import math
import os
import threading
from array import array
from dataclasses import dataclass
from pathlib import Path

CHUNK_BYTES = 8 << 20
"""Bytes read per call while catching up with a file, so a large log never sits in memory whole."""


@dataclass(frozen=True)
class Latest:
    """The newest step of a run and what it reported: the list page's columns."""

    step: int | None
    tokens: int | None
    loss: float | None
    """The last finite train loss logged (a step with a non-finite loss keeps the previous one)."""


class MetricsIndex:
    """Byte spans and steps of the records of one metrics file, extended by `refresh()`; safe across threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.revision = 0
        """Bumped whenever the file was replaced or shortened and the index started over."""
        self.skipped_lines = 0
        """Complete lines that were not a JSON object with an integer step."""
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self._identity = identity
        self._offset = 0
        self._starts, self._ends, self._steps = array("q"), array("q"), array("q")
        self._latest = Latest(None, None, None)
        self.skipped_lines = 0

    def refresh(self) -> None:
        """Index the complete lines appended since the last call (all of them again if the file was replaced)."""
        with self._lock:
            self._refresh()

    def _refresh(self) -> None:
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            if self._identity is not None:
                self._reset(None)
                self.revision += 1
            return
        with handle:
            stat = os.fstat(handle.fileno())
            identity = (stat.st_dev, stat.st_ino)
            if self._identity is None:
                self._identity = identity
            elif identity != self._identity or stat.st_size < self._offset:
                self._reset(identity)
                self.revision += 1
            while self._offset < stat.st_size:
                handle.seek(self._offset)
                chunk = handle.read(min(CHUNK_BYTES, stat.st_size - self._offset))
                end = chunk.rfind(b"\n")
                if end < 0:
                    if len(chunk) < CHUNK_BYTES:
                        return  # a line still being written
                    end = len(chunk) - 1  # one line longer than a chunk: not a record this index serves
                    self.skipped_lines += 1
                else:
                    self._index(chunk[: end + 1], self._offset)
                self._offset += end + 1

    def _index(self, block: bytes, offset: int) -> None:
        """Record the span and step of each line of `block` (complete lines starting at file offset `offset`)."""
        position = offset
        latest = self._latest
        for line in block.split(b"\n")[:-1]:
            start, text = position, line.rstrip(b"\r \t")
            position += len(line) + 1
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self.skipped_lines += 1
                continue
            step = record.get("step") if isinstance(record, dict) else None
            if not isinstance(step, int) or isinstance(step, bool):
                self.skipped_lines += 1
                continue
            self._starts.append(start + len(line) - len(line.lstrip()))
            self._ends.append(start + len(text))
            self._steps.append(step)
            loss, tokens = record.get("loss"), record.get("tokens")
            finite = isinstance(loss, (int, float)) and math.isfinite(loss)
            latest = Latest(
                step,
                tokens if isinstance(tokens, int) else latest.tokens,
                float(loss) if finite else latest.loss,
            )
        self._latest = latest

    @property
    def latest(self) -> Latest:
        """Step, tokens and loss of the newest indexed record."""
        return self._latest

    @property
    def records(self) -> int:
        """How many records are indexed."""
        return len(self._steps)

    def records_since(self, since: int) -> tuple[int, bytes]:
        """Refresh, then the revision and the records whose step is above `since` as a JSON array, in file order.

        The array is the file's own bytes joined by commas.
        """
        with self._lock:
            self._refresh()
            chosen = [i for i, step in enumerate(self._steps) if step > since]
            if not chosen:
                return self.revision, b"[]"
            first, last = self._starts[chosen[0]], self._ends[chosen[-1]]
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if (stat.st_dev, stat.st_ino) != self._identity or stat.st_size < last:
                    return self.revision + 1, b"[]"  # replaced just now: the next refresh re-reads it
                handle.seek(first)
                block = handle.read(last - first)
            parts = [block[self._starts[i] - first : self._ends[i] - first] for i in chosen]
            return self.revision, b"[" + b",".join(parts) + b"]"
