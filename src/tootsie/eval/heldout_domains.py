"""Held-out domains for a Paloma-style BPB suite: a directory of text, one domain per entry, tokenized once.

A suite directory holds any number of domains; each entry is one domain:

    suite/
      c4_en.jsonl           a file: the domain is its stem ("c4_en"); JSONL lines {"text": ...}
      wiki.parquet          a Parquet file with a `text` column
      essay.txt             a text file: one document
      code/                 a subdirectory: every .txt/.md/.jsonl(.gz/.zst)/.parquet file under it

Hidden entries (a leading dot) are skipped. Each domain becomes one executor
step, `bpb_suite/<domain>` (`tokenize_domain`), whose config holds the files,
the sha256 of their bytes and the tokenizer's sha256, so the cache is
content-addressed: a second call with the same files and tokenizer finds it
SUCCESS and reuses it, an edited file gives a new hash and a new cache (so
does moving the suite: the file paths are hashed too). The
cache is an ordinary token cache (BOS/EOS around every document, as the
datakit tokenizer writes them), read by `tootsie.eval.bpb.domain_bpb`.

Example: `suite/math.jsonl` with 200 lines and a tokenizer T give the step
`bpb_suite/math-<hash>` with one cache of 200 documents; changing one line of
the file changes `content_sha256` and so the hash.
"""

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tootsie.configfile import unhashed
from tootsie.datakit.readers import JSONL_SUFFIXES, TEXT_SUFFIXES, read_records
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.datakit.tokenize import encode_texts
from tootsie.datakit.tokenizer import TOKENIZER_FILE, file_sha256
from tootsie.errors import TootsieError
from tootsie.executor import Step, StepRef
from tootsie.executor.portable import portable

DOMAIN_SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + (".parquet",)
"""Files a domain may hold."""
STEP_PREFIX = "bpb_suite"
"""Step-name prefix of the domain caches."""
_BATCH_DOCS = 256
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _is_domain_file(path: Path) -> bool:
    return path.is_file() and not path.name.startswith(".") and path.name.endswith(DOMAIN_SUFFIXES)


def _stem(path: Path) -> str:
    """The domain name of a file: its name without the format suffix (`c4.jsonl.gz` → `c4`)."""
    suffix = next(s for s in sorted(DOMAIN_SUFFIXES, key=len, reverse=True) if path.name.endswith(s))
    return path.name[: -len(suffix)]


def discover_domains(suite_dir: str | Path) -> dict[str, tuple[Path, ...]]:
    """Domain name → its files, sorted: one per supported file or subdirectory of `suite_dir`."""
    root = Path(suite_dir)
    if not root.is_dir():
        raise TootsieError(f"suite directory {root} not found; pass a directory with one file or folder per domain")
    domains: dict[str, tuple[Path, ...]] = {}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            files = tuple(sorted(p for p in entry.rglob("*") if _is_domain_file(p)))
            if not files:
                raise TootsieError(
                    f"domain folder {entry} holds no {', '.join(DOMAIN_SUFFIXES)} files; add some or remove it"
                )
            name = entry.name
        elif _is_domain_file(entry):
            files, name = (entry,), _stem(entry)
        else:
            raise TootsieError(
                f"{entry} is not a domain: expected a folder or a file ending in one of {DOMAIN_SUFFIXES}"
            )
        if not _NAME.fullmatch(name):
            raise TootsieError(f"domain name {name!r} (from {entry}) may use only [A-Za-z0-9_.-]; rename the entry")
        if name in domains:
            raise TootsieError(f"two entries of {root} are both domain {name!r}; rename one of them")
        domains[name] = files
    if not domains:
        raise TootsieError(
            f"suite directory {root} holds no domains; add one .txt/.jsonl/.parquet file or folder per domain"
        )
    return domains


def files_sha256(files: tuple[Path, ...], root: Path) -> str:
    """sha256 over every file's name (relative to `root`) and bytes, in order: the domain's content address."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode("utf-8") + b"\0")
        digest.update(file_sha256(path).encode("ascii"))
    return digest.hexdigest()


@dataclass(frozen=True)
class DomainCacheConfig:
    """One held-out domain's text files and the tokenizer that turns them into a token cache."""

    domain: str
    """Domain name (shown in errors and the cache ledger)."""
    files: tuple[str | StepRef, ...]
    """Text, JSONL or Parquet files (records with a `text` field), read in order."""
    tokenizer: str | StepRef
    """A tokenizer.json, or a directory holding one."""
    content_sha256: str | None = None
    """sha256 of the files' names and bytes (`files_sha256`); None when the files are step outputs."""
    tokenizer_sha256: str | None = None
    """sha256 of the tokenizer file; None when it is a step output."""
    batch_docs: int = unhashed(_BATCH_DOCS)
    """Documents per `encode_batch` call."""


def _documents(domain: str, path: str) -> Iterator[str]:
    """The texts of one domain file; an unreadable file or record is an error naming it."""
    rejected: list[str] = []
    try:
        for _, text in read_records(path, "text", "id", rejected.append):
            if not isinstance(text, str):
                raise TootsieError(f"domain {domain!r}: {path} has a record whose text is not a string")
            yield text
    except (OSError, pa.ArrowException, UnicodeDecodeError) as error:
        raise TootsieError(f"domain {domain!r}: cannot read {path}: {error}") from None
    if rejected:
        raise TootsieError(
            f"domain {domain!r}: {path} has {len(rejected)} unreadable record(s) ({sorted(set(rejected))}); "
            'fix the file (UTF-8 text; JSONL lines {"text": ...})'
        )


def tokenize_domain(config: DomainCacheConfig, output_path: str) -> dict[str, object]:
    """Encode every document of the domain's files (BOS/EOS around each) into a token cache at `output_path`."""
    path = Path(config.tokenizer)
    tokenizer_file = path / TOKENIZER_FILE if path.is_dir() else path
    tokenizer, special = load_with_special_tokens(tokenizer_file)
    bos, eos = [special.require("bos")], [special.require("eos")]
    texts = [text for file in config.files for text in _documents(config.domain, str(file))]
    if not texts:
        raise TootsieError(f"domain {config.domain!r} has no documents in {[str(f) for f in config.files]}")
    writer = TokenCacheWriter(
        output_path,
        vocab_size=tokenizer.get_vocab_size(),
        ledger_extra={
            "tokenizer_sha256": file_sha256(tokenizer_file),
            "bos_id": bos[0],
            "eos_id": eos[0],
            "special_tokens": special.ledger(),
            "domain": config.domain,
            "source": [portable(str(f)) for f in config.files],  # a step's output by its id, not its prefix
        },
    )
    for start in range(0, len(texts), config.batch_docs):
        writer.append_flat(*encode_texts(tokenizer, texts[start : start + config.batch_docs], bos, eos, writer.dtype))
    return writer.close()


def domain_cache_steps(suite_dir: str | Path, tokenizer: str | Path) -> dict[str, Step[DomainCacheConfig]]:
    """Domain name → the step that tokenizes it, content-addressed on the domain's files and the tokenizer."""
    root = Path(suite_dir).resolve()
    path = Path(tokenizer).resolve()
    tokenizer_file = path / TOKENIZER_FILE if path.is_dir() else path
    if not tokenizer_file.is_file():
        raise TootsieError(f"tokenizer {tokenizer_file} not found; pass the tokenizer.json the model was trained with")
    tokenizer_sha = file_sha256(tokenizer_file)
    return {
        name: Step(
            f"{STEP_PREFIX}/{name}",
            tokenize_domain,
            DomainCacheConfig(
                domain=name,
                files=tuple(str(f) for f in files),
                tokenizer=str(tokenizer_file),
                content_sha256=files_sha256(files, root),
                tokenizer_sha256=tokenizer_sha,
            ),
            description=f"held-out domain {name!r}: {len(files)} file(s) → token cache",
        )
        for name, files in discover_domains(root).items()
    }
