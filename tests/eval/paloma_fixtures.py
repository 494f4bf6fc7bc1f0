"""A made-up Paloma mirror in the release's layout, and the tokenizer and tiny model the Paloma tests score it with."""

import gzip
import json
from pathlib import Path

import pyarrow as pa

from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer

ADDED = "2023-11-30T00:00:00.000Z"
"""The `added` stamp every made-up record carries (the release's field, any ISO time)."""


def _record(source: str, number: int, text: str, subdomain: str | None) -> dict[str, object]:
    """One record with the dataset card's fields: text, id, added, source, (subdomain,) metadata."""
    record: dict[str, object] = {"text": text, "id": f"{source}-{number}", "added": ADDED, "source": source}
    if subdomain is not None:
        record["subdomain"] = subdomain
    record["metadata"] = {"url": f"https://example.org/{source}/{number}"}
    return record


def write_gz_jsonl(path: Path, records: list[dict[str, object]]) -> None:
    """Gzip-compressed JSON lines, as the release ships them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(r) + "\n" for r in records)


def write_mirror(root: Path) -> Path:
    """Three sources, val and test: c4_en (no subdomains, one long document), two sources with subdomains."""
    mirror = root / "paloma"
    c4 = [
        "The cat sat on the mat, and the dog sat by the door. " * 6,  # longer than a few windows of 8 tokens
        "A short café note.",
        "Rain fell on the town all day.",
    ]
    write_gz_jsonl(mirror / "c4_en" / "val" / "val.jsonl.gz", [_record("c4_en", i, t, None) for i, t in enumerate(c4)])
    write_gz_jsonl(mirror / "c4_en" / "test" / "test.jsonl.gz", [_record("c4_en", 9, "A test-split line.", None)])
    domains = {
        "www.nature.com": ["Cells divide by mitosis.", "The protein folds in water at room temperature."],
        "www.ign.com": ["The game runs at sixty frames.", "A boss fight ends the level."],
    }
    for i, (subdomain, texts) in enumerate(domains.items()):  # one file per subdomain
        records = [_record("c4_100_domains", 10 * i + j, t, subdomain) for j, t in enumerate(texts)]
        write_gz_jsonl(mirror / "c4_100_domains" / "val" / f"val_{i:02d}.jsonl.gz", records)
    reddit = [
        ("r_depression", "Some days are heavy; talking helps."),
        ("r_python", "def f(x):\n    return x * 2\n"),
        ("r_depression", "Sleep and sun help me."),
        ("r_python", "import json\nprint(json.dumps({}))\n"),
    ]
    records = [_record("dolma_100_subreddits", i, t, s) for i, (s, t) in enumerate(reddit)]  # subdomains mixed
    write_gz_jsonl(mirror / "dolma_100_subreddits" / "val" / "val.jsonl.gz", records)
    return mirror


def train_fixture_tokenizer(root: Path) -> str:
    """A 300-token BPE over text like the mirror's, with tootsie's BOS/EOS."""
    texts = ["The cat sat on the mat café. Cells divide; the game runs. def f(x): return x * 2"] * 30
    write_table_atomic(pa.table({"text": texts}), root / "tokdocs" / "part-00000.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(root / "tokdocs"),), vocab_size=300), str(root / "tok"))
    return str(root / "tok" / "tokenizer.json")
