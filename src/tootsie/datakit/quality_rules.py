"""Heuristic quality rules for one document: Gopher quality, Gopher repetition, C4 lines, compression.

Four rule families, each a frozen config whose thresholds default to the
published values (sources beside each number) and whose every rule is switched
off by setting its threshold to None, and a function per family that returns,
for one text, the signal values (numbers, so a later stage can pick other
thresholds without recomputing) and a pass/fail per active rule. The C4 family
also returns its line removals as character spans `[start, end)` (code-point
offsets into the text) that the consolidate stage cuts out. `quality.py`
combines the families (`QualityRules`) and runs them over document shards.

These rules were written for web prose. On source code they misfire (C4 cuts
every line without terminal punctuation and fails documents with `{`; Gopher
wants stop words and few `#`), hence `QualityRules.for_code()`.

Words are `\\w+` runs (punctuation is not a word, as in datatrove's counts after
word_tokenize). Lines and paragraphs are compared stripped, blank ones ignored.

Example: a text of one line repeated 20 times has `rep_dup_line_fraction` 0.95
(19 of 20 lines repeat an earlier one), above Gopher's 0.30, so
`gopher_repetition(text, GopherRepetitionConfig())[1]["rep_dup_line_fraction"]`
is False.
"""

import re
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import zstandard

WORD = re.compile(r"\w+")
HAS_ALPHA = re.compile(r"[^\W\d_]")
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")  # Rae et al. 2021, appendix A.1.1
BULLETS = ("•", "●", "*", "-")  # Dolma's Gopher tagger (datatrove checks "•" only)
ELLIPSES = ("...", "…")
END_PUNCTUATION = (".", "?", "!", '"', "'")  # C4's terminal marks (tfds c4_utils._END_MARKS)
CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")  # tfds c4_utils citation regex
POLICY_PHRASES = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)  # tfds c4_utils
SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
NGRAM_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio), for polynomial n-gram keys
SPANS_TYPE = pa.list_(pa.list_(pa.int64()))


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _within(value: float, low: float | None, high: float | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


@dataclass(frozen=True)
class GopherQualityConfig:
    """Gopher quality filter (Rae et al. 2021, appendix A.1.1; datatrove's GopherQualityFilter defaults)."""

    min_words: int | None = 50
    """Fewest words (Gopher: 50); None: no lower bound."""
    max_words: int | None = 100_000
    """Most words (Gopher: 100,000); None: no upper bound."""
    min_mean_word_length: float | None = 3.0
    """Shortest mean word length in characters (Gopher: 3)."""
    max_mean_word_length: float | None = 10.0
    """Longest mean word length in characters (Gopher: 10)."""
    max_symbol_word_ratio: float | None = 0.1
    """Most `#` per word, and most ellipses per word (Gopher: 0.1 each)."""
    max_bullet_lines_fraction: float | None = 0.9
    """Most non-blank lines starting with a bullet (Gopher: 90 %)."""
    max_ellipsis_lines_fraction: float | None = 0.3
    """Most non-blank lines ending with an ellipsis (Gopher: 30 %)."""
    min_alpha_words_fraction: float | None = 0.8
    """Fewest words holding an alphabetic character (Gopher: 80 %)."""
    min_stop_words: int | None = 2
    """Fewest stop-word occurrences, case-insensitive (Gopher: 2; datatrove counts occurrences)."""
    stop_words: tuple[str, ...] = STOP_WORDS
    """Lowercase stop words."""

    def __post_init__(self) -> None:
        for name in (
            "min_words",
            "max_words",
            "min_mean_word_length",
            "max_mean_word_length",
            "max_symbol_word_ratio",
            "min_stop_words",
        ):
            value = getattr(self, name)
            _check(value is None or value >= 0, f"GopherQualityConfig.{name} must be >= 0 or None, got {value!r}")
        for name in ("max_bullet_lines_fraction", "max_ellipsis_lines_fraction", "min_alpha_words_fraction"):
            value = getattr(self, name)
            _check(
                value is None or 0 <= value <= 1,
                f"GopherQualityConfig.{name} must be a fraction in [0, 1] or None, got {value!r}",
            )
        for low, high in (("min_words", "max_words"), ("min_mean_word_length", "max_mean_word_length")):
            a, b = getattr(self, low), getattr(self, high)
            _check(
                a is None or b is None or a <= b, f"GopherQualityConfig: {low}={a!r} exceeds {high}={b!r}; swap them"
            )
        _check(
            all(w == w.lower() for w in self.stop_words),
            f"GopherQualityConfig.stop_words must be lowercase, got {self.stop_words!r}",
        )

    @property
    def rules(self) -> tuple[str, ...]:
        """Names of the active rules."""
        active = {
            "gopher_word_count": self.min_words is not None or self.max_words is not None,
            "gopher_mean_word_length": self.min_mean_word_length is not None or self.max_mean_word_length is not None,
            "gopher_symbol_word_ratio": self.max_symbol_word_ratio is not None,
            "gopher_bullet_lines": self.max_bullet_lines_fraction is not None,
            "gopher_ellipsis_lines": self.max_ellipsis_lines_fraction is not None,
            "gopher_alpha_words": self.min_alpha_words_fraction is not None,
            "gopher_stop_words": self.min_stop_words is not None,
        }
        return tuple(name for name, on in active.items() if on)


GOPHER_SIGNALS = {
    "gopher_words": pa.int64(),
    "gopher_mean_word_length": pa.float64(),
    "gopher_hash_word_ratio": pa.float64(),
    "gopher_ellipsis_word_ratio": pa.float64(),
    "gopher_bullet_lines_fraction": pa.float64(),
    "gopher_ellipsis_lines_fraction": pa.float64(),
    "gopher_alpha_words_fraction": pa.float64(),
    "gopher_stop_words": pa.int64(),
}


def gopher_quality(text: str, config: GopherQualityConfig) -> tuple[dict[str, Any], dict[str, bool]]:
    """Gopher quality signals of `text` and the verdict of each active rule."""
    words = WORD.findall(text)
    n = len(words)
    counts = Counter(map(str.lower, words))
    lines = [line for line in (raw.strip() for raw in text.splitlines()) if line]
    s = {
        "gopher_words": n,
        "gopher_mean_word_length": sum(map(len, words)) / n if n else 0.0,
        "gopher_hash_word_ratio": text.count("#") / max(n, 1),
        "gopher_ellipsis_word_ratio": (text.count("...") + text.count("…")) / max(n, 1),
        "gopher_bullet_lines_fraction": sum(line.startswith(BULLETS) for line in lines) / max(len(lines), 1),
        "gopher_ellipsis_lines_fraction": sum(line.endswith(ELLIPSES) for line in lines) / max(len(lines), 1),
        "gopher_alpha_words_fraction": sum(c for w, c in counts.items() if HAS_ALPHA.search(w)) / n if n else 0.0,
        "gopher_stop_words": sum(counts[w] for w in config.stop_words),
    }
    c = config
    verdicts = {
        "gopher_word_count": _within(n, c.min_words, c.max_words),
        "gopher_mean_word_length": _within(
            s["gopher_mean_word_length"], c.min_mean_word_length, c.max_mean_word_length
        ),
        "gopher_symbol_word_ratio": max(s["gopher_hash_word_ratio"], s["gopher_ellipsis_word_ratio"])
        <= (c.max_symbol_word_ratio or 0),
        "gopher_bullet_lines": s["gopher_bullet_lines_fraction"] <= (c.max_bullet_lines_fraction or 0),
        "gopher_ellipsis_lines": s["gopher_ellipsis_lines_fraction"] <= (c.max_ellipsis_lines_fraction or 0),
        "gopher_alpha_words": s["gopher_alpha_words_fraction"] >= (c.min_alpha_words_fraction or 0),
        "gopher_stop_words": s["gopher_stop_words"] >= (c.min_stop_words or 0),
    }
    return s, {rule: verdicts[rule] for rule in config.rules}


@dataclass(frozen=True)
class GopherRepetitionConfig:
    """Gopher repetition filter; thresholds from Rae et al. 2021, table A1. None switches a rule off."""

    max_dup_line_fraction: float | None = 0.30
    """Most non-blank lines that repeat an earlier line."""
    max_dup_paragraph_fraction: float | None = 0.30
    """Most paragraphs that repeat an earlier paragraph."""
    max_dup_line_char_fraction: float | None = 0.20
    """Most characters (of the text) in repeated lines."""
    max_dup_paragraph_char_fraction: float | None = 0.20
    """Most characters (of the text) in repeated paragraphs."""
    max_top_ngram_char_fraction: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    """(n, most word characters in the most frequent n-gram's occurrences); () turns all off."""
    max_dup_ngram_char_fraction: tuple[tuple[int, float], ...] = (
        (5, 0.15),
        (6, 0.14),
        (7, 0.13),
        (8, 0.12),
        (9, 0.11),
        (10, 0.10),
    )
    """(n, most word characters covered by n-grams occurring more than once); () turns all off."""

    def __post_init__(self) -> None:
        for name in (
            "max_dup_line_fraction",
            "max_dup_paragraph_fraction",
            "max_dup_line_char_fraction",
            "max_dup_paragraph_char_fraction",
        ):
            value = getattr(self, name)
            _check(
                value is None or 0 <= value <= 1,
                f"GopherRepetitionConfig.{name} must be a fraction in [0, 1] or None, got {value!r}",
            )
        for name in ("max_top_ngram_char_fraction", "max_dup_ngram_char_fraction"):
            pairs = getattr(self, name)
            ns = [pair[0] for pair in pairs]
            _check(
                all(len(pair) == 2 and pair[0] >= 1 and 0 <= pair[1] <= 1 for pair in pairs)
                and len(set(ns)) == len(ns),
                f"GopherRepetitionConfig.{name} must hold distinct (n >= 1, fraction in [0, 1]) pairs, got {pairs!r}",
            )

    @property
    def signals(self) -> dict[str, pa.DataType]:
        """Signal columns and their types."""
        names = [
            "rep_dup_line_fraction",
            "rep_dup_line_char_fraction",
            "rep_dup_paragraph_fraction",
            "rep_dup_paragraph_char_fraction",
        ]
        names += [f"rep_top_{n}gram_char_fraction" for n, _ in self.max_top_ngram_char_fraction]
        names += [f"rep_dup_{n}gram_char_fraction" for n, _ in self.max_dup_ngram_char_fraction]
        return dict.fromkeys(names, pa.float64())

    @property
    def thresholds(self) -> dict[str, float]:
        """Upper bound of each active rule, keyed by the rule (and signal) name."""
        bounds = {
            f"rep_{name[4:]}": getattr(self, name)
            for name in (
                "max_dup_line_fraction",
                "max_dup_line_char_fraction",
                "max_dup_paragraph_fraction",
                "max_dup_paragraph_char_fraction",
            )
        }
        bounds |= {f"rep_top_{n}gram_char_fraction": f for n, f in self.max_top_ngram_char_fraction}
        bounds |= {f"rep_dup_{n}gram_char_fraction": f for n, f in self.max_dup_ngram_char_fraction}
        return {name: bound for name, bound in bounds.items() if bound is not None}

    @property
    def rules(self) -> tuple[str, ...]:
        """Names of the active rules."""
        return tuple(self.thresholds)


def _duplicates(items: list[str]) -> tuple[int, int]:
    """How many items repeat an earlier one, and their total characters."""
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


def ngram_char_fractions(words: list[str], top_ns: tuple[int, ...], dup_ns: tuple[int, ...]) -> dict[str, float]:
    """Top and duplicate n-gram character fractions over the words' characters (Dolma's Gopher definitions).

    top: count x characters of the most frequent n-gram, capped at 1 (0 when no
    n-gram repeats). dup: characters of words covered by any n-gram that occurs
    more than once, each word counted once. N-grams are compared by a 64-bit
    polynomial key over Python's word hashes (collision odds about 2**-64).
    An (n+1)-gram can only repeat where the n-grams at i and i+1 both repeat,
    so after the first full count only those candidates are counted.
    """
    out = {f"rep_top_{n}gram_char_fraction": 0.0 for n in top_ns} | {
        f"rep_dup_{n}gram_char_fraction": 0.0 for n in dup_ns
    }
    total_words = len(words)
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=total_words)
    total_chars = int(lengths.sum())
    if total_chars == 0 or not (top_ns or dup_ns):
        return out
    keys = hashes = np.fromiter(map(hash, words), dtype=np.int64, count=total_words).view(np.uint64)
    cumulative = np.concatenate([[0], np.cumsum(lengths)])
    repeats: np.ndarray | None = None  # repeats[i]: the (n-1)-gram starting at word i occurs more than once
    for n in range(1, max(top_ns + dup_ns) + 1):
        starts = total_words - n + 1
        if starts < 2:
            break
        if n > 1:
            keys = keys[:starts] * NGRAM_MULTIPLIER + hashes[n - 1 : n - 1 + starts]
        if n < min(top_ns + dup_ns):
            continue
        occurrences = np.zeros(starts, dtype=np.int64)
        candidates = (
            np.arange(starts) if repeats is None or n in top_ns else np.flatnonzero(repeats[:starts] & repeats[1:])
        )
        if len(candidates):
            _, inverse, counts = np.unique(keys[candidates], return_inverse=True, return_counts=True)
            occurrences[candidates] = counts[inverse]
        repeats = occurrences > 1
        if n in top_ns:
            best = int(
                np.argmax(occurrences)
            )  # first start of a most frequent n-gram, as Counter.most_common breaks ties
            if occurrences[best] > 1:
                chars = int(occurrences[best]) * int(cumulative[best + n] - cumulative[best])
                out[f"rep_top_{n}gram_char_fraction"] = min(1.0, chars / total_chars)
        if n in dup_ns:
            covered = np.convolve(repeats.astype(np.int64), np.ones(n, dtype=np.int64)) > 0
            out[f"rep_dup_{n}gram_char_fraction"] = int(lengths[covered].sum()) / total_chars
    return out


def gopher_repetition(text: str, config: GopherRepetitionConfig) -> tuple[dict[str, Any], dict[str, bool]]:
    """Gopher repetition signals of `text` and the verdict of each active rule."""
    lines = [line for line in (raw.strip() for raw in text.splitlines()) if line]
    paragraphs = [p for p in (raw.strip() for raw in PARAGRAPH_BREAK.split(text)) if p]
    dup_lines, dup_line_chars = _duplicates(lines)
    dup_paragraphs, dup_paragraph_chars = _duplicates(paragraphs)
    size = max(len(text), 1)
    signals: dict[str, Any] = {
        "rep_dup_line_fraction": dup_lines / max(len(lines), 1),
        "rep_dup_line_char_fraction": dup_line_chars / size,
        "rep_dup_paragraph_fraction": dup_paragraphs / max(len(paragraphs), 1),
        "rep_dup_paragraph_char_fraction": dup_paragraph_chars / size,
    }
    top_ns = tuple(n for n, _ in config.max_top_ngram_char_fraction)
    dup_ns = tuple(n for n, _ in config.max_dup_ngram_char_fraction)
    if top_ns or dup_ns:
        signals |= ngram_char_fractions(WORD.findall(text), top_ns, dup_ns)
    return signals, {rule: signals[rule] <= bound for rule, bound in config.thresholds.items()}


@dataclass(frozen=True)
class C4Config:
    """C4's line and page rules (Raffel et al. 2020, section 2.2; tfds c4_utils.clean_page, as in datatrove).

    Sentences are counted by their end marks (`.`, `!`, `?` before a space or
    the line end), not with nltk's punkt as C4 did: "Mr. Smith left." counts 2.
    """

    min_words_per_line: int | None = 3
    """Remove lines with fewer words (C4: 3); None keeps short lines."""
    max_word_length: int | None = 1000
    """Remove lines holding a longer word (tfds: 1000 characters); None: no limit."""
    require_terminal_punctuation: bool = True
    """Remove lines not ending in . ? ! " ' (or ending in an ellipsis)."""
    remove_citations: bool = True
    """Cut Wikipedia citation marks like [1], [edit], [citation needed] out of kept lines."""
    remove_javascript_lines: bool = True
    """Remove lines mentioning "javascript"."""
    remove_policy_lines: bool = True
    """Remove lines with "terms of use", "privacy policy", cookie notices."""
    drop_lorem_ipsum: bool = True
    """Fail documents with a kept line holding "lorem ipsum" (rule `c4_lorem_ipsum`)."""
    drop_curly_bracket: bool = True
    """Fail documents with a kept line holding "{" (rule `c4_curly_bracket`); it fails nearly all code."""
    min_sentences: int | None = 5
    """Fewest sentences (end marks, not punkt) in the kept lines (C4: 5; some use 3); rule `c4_min_sentences`."""

    def __post_init__(self) -> None:
        for name in ("min_words_per_line", "max_word_length", "min_sentences"):
            value = getattr(self, name)
            _check(
                value is None or value >= 1,
                f"C4Config.{name} must be >= 1 or None (None switches it off), got {value!r}",
            )

    @property
    def rules(self) -> tuple[str, ...]:
        """Names of the active document-level rules."""
        active = {
            "c4_lorem_ipsum": self.drop_lorem_ipsum,
            "c4_curly_bracket": self.drop_curly_bracket,
            "c4_min_sentences": self.min_sentences is not None,
        }
        return tuple(name for name, on in active.items() if on)


C4_SIGNALS = {
    "c4_sentences": pa.int64(),
    "c4_lines_removed": pa.int64(),
    "c4_chars_removed": pa.int64(),
    "c4_removed_spans": SPANS_TYPE,
}


def _line_removal(line: str, cleaned: str, config: C4Config) -> str | None:
    """Why C4 removes this stripped line (`cleaned` has its citations cut), or None to keep it."""
    words = line.split()
    if config.max_word_length is not None and any(len(w) > config.max_word_length for w in words):
        return "long_word"
    if config.require_terminal_punctuation and (not cleaned.endswith(END_PUNCTUATION) or cleaned.endswith("...")):
        return "no_terminal_punctuation"
    if config.min_words_per_line is not None and len(words) < config.min_words_per_line:
        return "too_few_words"
    lower = line.lower()
    if config.remove_javascript_lines and "javascript" in lower:
        return "javascript"
    if config.remove_policy_lines and any(p in lower for p in POLICY_PHRASES):
        return "policy"
    return None


def c4_lines(text: str, config: C4Config) -> tuple[dict[str, Any], dict[str, bool], Counter[str]]:
    """C4 signals of `text` (with the removed spans), the verdict of each active rule, and removed lines per reason."""
    spans: list[list[int]] = []
    reasons: Counter[str] = Counter()
    sentences = offset = 0
    lorem = curly = False

    def cut(start: int, end: int) -> None:
        if spans and spans[-1][1] == start:
            spans[-1][1] = end
        else:
            spans.append([start, end])

    for raw in text.splitlines(keepends=True):
        start, offset = offset, offset + len(raw)
        line = raw.strip()
        cleaned = CITATION.sub("", line) if config.remove_citations else line
        reason = _line_removal(line, cleaned, config)
        if reason is not None:
            reasons[reason] += 1
            cut(start, offset)
            continue
        lorem |= "lorem ipsum" in line.lower()
        curly |= "{" in line
        sentences += max(1, len(SENTENCE_END.findall(cleaned)))
        if config.remove_citations and cleaned != line:
            for match in CITATION.finditer(raw):
                cut(start + match.start(), start + match.end())
    signals = {
        "c4_sentences": sentences,
        "c4_lines_removed": sum(reasons.values()),
        "c4_chars_removed": sum(end - start for start, end in spans),
        "c4_removed_spans": spans,
    }
    verdicts = {
        "c4_lorem_ipsum": not lorem,
        "c4_curly_bracket": not curly,
        "c4_min_sentences": sentences >= (config.min_sentences or 0),
    }
    return signals, {rule: verdicts[rule] for rule in config.rules}, reasons


@dataclass(frozen=True)
class CompressionConfig:
    """Compressed size / UTF-8 size: very low is repetitive junk, very high is random bytes or base64."""

    codec: str = "zlib"
    """"zlib" (stdlib) or "zstd"."""
    level: int = 6
    """Compression level (zlib's default 6; zstd takes 1..22)."""
    # Stdlib corpus, zlib-6, docs >= 500 B: code 0.18-0.66, prose 0.22-0.61; 50 copies of a paragraph: 0.02.
    min_ratio: float | None = 0.1
    """Lowest ratio kept (code and prose sit at 0.18 or more; a paragraph copied 50 times at 0.02)."""
    max_ratio: float | None = 0.72
    """Highest ratio kept (base64 of random bytes: 0.76 with zlib-6; random lowercase letters: 0.63)."""
    min_bytes: int = 500
    """Shorter documents pass: their ratio is dominated by the codec's fixed overhead."""

    def __post_init__(self) -> None:
        _check(self.codec in ("zlib", "zstd"), f"CompressionConfig.codec must be 'zlib' or 'zstd', got {self.codec!r}")
        top = 9 if self.codec == "zlib" else 22
        _check(
            1 <= self.level <= top,
            f"CompressionConfig.level must be in [1, {top}] for {self.codec}, got {self.level!r}",
        )
        low, high = self.min_ratio, self.max_ratio
        _check(
            (low is None or low >= 0) and (high is None or high > 0),
            f"CompressionConfig ratios must be positive or None, got {low=!r}, {high=!r}",
        )
        _check(
            low is None or high is None or low < high,
            f"CompressionConfig.min_ratio={low!r} must be below max_ratio={high!r}",
        )
        _check(self.min_bytes >= 0, f"CompressionConfig.min_bytes must be >= 0, got {self.min_bytes!r}")

    @property
    def rules(self) -> tuple[str, ...]:
        """Names of the active rules."""
        return ("compression_ratio",) if self.min_ratio is not None or self.max_ratio is not None else ()


@lru_cache(maxsize=4)
def _zstd(level: int) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=level)


def compression_ratio(text: str, config: CompressionConfig) -> tuple[dict[str, Any], dict[str, bool]]:
    """Compression ratio of `text` and the verdict of the `compression_ratio` rule."""
    data = text.encode("utf-8")
    packed = zlib.compress(data, config.level) if config.codec == "zlib" else _zstd(config.level).compress(data)
    ratio = len(packed) / len(data) if data else 0.0
    ok = len(data) < config.min_bytes or _within(ratio, config.min_ratio, config.max_ratio)
    return {"compression_ratio": ratio}, {rule: ok for rule in config.rules}
