"""Stable content ids: `id = xxh3_128(text)` as 32 hex digits.

The id depends on the text alone (after normalization), so the same document
gets the same id on any machine, and exact duplicates share an id.
"""

import xxhash


def content_id(text: str) -> str:
    """The hex xxh3_128 of the UTF-8 bytes of `text`."""
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8"))


def id_fraction(doc_id: str) -> float:
    """Map a hex id to [0, 1) uniformly, for splits chosen by id."""
    return int(doc_id[:13], 16) / float(16**13)
