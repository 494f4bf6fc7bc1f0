"""Local copies of benchmark datasets: where the suite looks for them, the mirror that fetches them, their checksums.

A benchmark's split lives at `DATA_DIR/<repo>/<config>/<split>.jsonl` (or
`.parquet`), rows in the Hub dataset's own schema (`allenai/ai2_arc/ARC-Easy/test.jsonl`
holds ARC's `id, question, choices, answerKey`). `mirror` writes exactly that
layout from the Hub (through `datasets`, imported lazily; it needs a network)
and records every file's sha256, size and row count in `DATA_DIR/manifest.json`.
When a manifest is present the suite checks each file it reads against it, so
a truncated or edited copy is refused instead of scored. Offline, a missing
file is a one-line error naming it and the mirror command that fetches it.
"""

import hashlib
import os
from pathlib import Path

from tootsie.errors import TootsieError
from tootsie.eval.benchmarks import Benchmark
from tootsie.extras import install_hint
from tootsie.jsonfile import read_json, write_json_atomic

MANIFEST_FILE = "manifest.json"
SUFFIXES = (".jsonl", ".parquet")
"""Accepted file formats, in the order they are looked for."""


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split_path(data_dir: Path, benchmark: Benchmark, config: str, split: str) -> Path:
    """The split's file under `data_dir`, or a TootsieError naming the expected path and the mirror command."""
    stem = Path(data_dir) / benchmark.repo / config / split
    for suffix in SUFFIXES:
        if stem.with_suffix(suffix).is_file():
            return stem.with_suffix(suffix)
    access = f"; {benchmark.access}" if benchmark.access else ""
    raise TootsieError(
        f"{benchmark.name}: missing {stem}.jsonl (or .parquet), {benchmark.repo} config {config!r} split {split!r};"
        f" run `tootsie eval mirror {benchmark.name} --out {data_dir}` where a network exists{access}"
    )


def benchmark_files(data_dir: Path, benchmark: Benchmark) -> dict[str, dict[str, Path]]:
    """`{config: {split: file}}` for every subtask and split of the benchmark, checked against the manifest if any."""
    files = {
        subtask.config: {split: split_path(data_dir, benchmark, subtask.config, split) for split in benchmark.splits}
        for subtask in benchmark.subtasks
    }
    verify_files(data_dir, [path for splits in files.values() for path in splits.values()])
    return files


def verify_files(data_dir: Path, paths: list[Path]) -> bool:
    """Check each file's sha256 against `data_dir/manifest.json`; False when there is no manifest (unverified)."""
    manifest = read_json(Path(data_dir) / MANIFEST_FILE)
    if manifest is None:
        return False
    recorded = manifest.get("files", {})
    for path in paths:
        key = path.relative_to(data_dir).as_posix()
        if key not in recorded:
            raise TootsieError(
                f"{path} is not listed in {Path(data_dir) / MANIFEST_FILE}; mirror it again"
                " (tootsie eval mirror) or record it with tootsie.eval.benchmark_data.record_files"
            )
        actual = sha256_of(path)
        if actual != recorded[key]["sha256"]:
            raise TootsieError(
                f"{path} has sha256 {actual} but {MANIFEST_FILE} records {recorded[key]['sha256']};"
                " the copy changed since it was mirrored: mirror it again"
            )
    return True


def record_files(data_dir: Path, paths: list[Path], sources: dict[str, dict[str, str]] | None = None) -> None:
    """Add the files' sha256, bytes and rows to `data_dir/manifest.json` (merged, written atomically)."""
    manifest = read_json(Path(data_dir) / MANIFEST_FILE) or {"files": {}}
    for path in paths:
        key = path.relative_to(data_dir).as_posix()
        manifest["files"][key] = {"sha256": sha256_of(path), "bytes": path.stat().st_size} | (sources or {}).get(
            key, {}
        )
    write_json_atomic(Path(data_dir) / MANIFEST_FILE, manifest)


def mirror(benchmarks: list[Benchmark], out: Path) -> dict[str, dict[str, object]]:
    """Download every split the benchmarks read from the Hub into `out`'s layout, as JSONL, and record checksums.

    Needs `datasets` (installed with `tootsie[lmeval]`) and a network; returns the manifest entries written.
    """
    try:
        import datasets
    except ModuleNotFoundError as error:
        raise TootsieError(f"mirroring needs `datasets` ({error}); {install_hint('lmeval')}") from error
    written, sources = [], {}
    for benchmark in benchmarks:
        for subtask in benchmark.subtasks:
            for split in benchmark.splits:
                path = Path(out) / benchmark.repo / subtask.config / f"{split}.jsonl"
                name = None if subtask.config == "default" else subtask.config
                try:
                    rows = datasets.load_dataset(benchmark.repo, name, split=split)
                except Exception as error:  # datasets raises several types offline; all mean "not fetched"
                    access = f"; {benchmark.access}" if benchmark.access else ""
                    raise TootsieError(
                        f"could not download {benchmark.repo} config {subtask.config!r} split {split!r} for {path}:"
                        f" {type(error).__name__}: {error}; mirroring needs network access to the Hugging Face Hub"
                        f"{access}"
                    ) from error
                path.parent.mkdir(parents=True, exist_ok=True)
                temporary = path.with_name(f".{path.name}.tmp")
                rows.to_json(str(temporary), lines=True, force_ascii=False)
                os.replace(temporary, path)
                written.append(path)
                key = path.relative_to(out).as_posix()
                sources[key] = {"repo": benchmark.repo, "config": subtask.config, "split": split, "rows": len(rows)}
                print(f"mirrored {key}: {len(rows)} rows", flush=True)
    record_files(Path(out), written, sources)
    manifest = read_json(Path(out) / MANIFEST_FILE) or {}
    return {key: manifest["files"][key] for key in sources}
