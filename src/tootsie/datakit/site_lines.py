"""Lines of a page as the site-boilerplate stage sees them: the site a URL belongs to, line keys, and line removal.

`site_boilerplate` counts on how many pages of one site each line appears;
this module says what "site" and "line" mean:

- **site**: the URL's hostname, lower-cased, a leading `www.` stripped
  (`www.Example.org` and `example.org` are one site; `docs.example.org` is
  another). With `group="registered_domain"` it is the registered domain
  instead (`a.example.co.uk` and `b.example.co.uk` are `example.co.uk`), read
  from the public-suffix list that the `tld` package ships (offline: it is
  never updated at run time); a host the list does not cover (`localhost`,
  `pydoc.local`, an IP address) stays its own site. A document without a URL
  host (an `.html` file's relative name, a null URL) has no site: it is never
  changed.
- **line**: the text between two `\\n`; a line blank after normalization is
  never counted and never removed.
- **normalization** of a line for counting (the text kept is never changed):
  NFKC then `casefold()` (full-width and ligature forms and case are a
  rendering difference, not a different line), whitespace runs collapsed to
  one space and trimmed (templates re-indent), and every run of digits
  replaced by `0`, so `© 2023 Example Corp` and `© 2024 Example Corp`, or
  `Page 3 of 12` and `Page 4 of 12`, count as one template line. Masking digits
  can merge two content lines that differ only in numbers (`Step 1`, `Step 2`);
  the stage removes a line only when it repeats on many pages of the site, so
  such a merge costs a short repeated line at most.
- **key**: `xxh3_64(site + "\\0" + normalized line)`, so one key is one (site,
  line) pair and the same paragraph on two sites is two keys; 0 stands for a
  blank line (a real line hashes to 0 with odds 2^-64).

Example: on `https://www.Example.org/a`, the line `  © 2024  Example\u00a0Corp ` has
the site `example.org` and the normalized text `© 0 example corp`.
"""

import re
import unicodedata
from typing import Literal
from urllib.parse import urlsplit

import numpy as np
import xxhash
from jaxtyping import Bool, UInt64

from tootsie.extras import import_extra

Grouping = Literal["host", "registered_domain"]
GROUPINGS: tuple[str, ...] = ("host", "registered_domain")
_DIGITS = re.compile(r"\d+")


def site_of(url: str | None, group: str = "host") -> str | None:
    """The site of `url` (see the module docstring), or None when it has no hostname."""
    if not url:
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:  # a malformed URL (e.g. an unbalanced IPv6 bracket) has no site
        return None
    if not host:
        return None
    host = host.rstrip(".").lower().removeprefix("www.")
    if group == "registered_domain":
        tld = import_extra("tld", extra="web", purpose="grouping pages by registered domain")
        return tld.get_fld(f"http://{host}", fail_silently=True) or host
    return host


def normalized_lines(text: str, mask_digits: bool = True) -> list[str]:
    """The counting form of every line of `text` (one entry per `\\n`-separated line, "" for a blank one)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _DIGITS.sub("0", folded) if mask_digits else folded
    lines = [" ".join(line.split()) for line in folded.split("\n")]  # 5x faster here than a whitespace regex
    if len(lines) != text.count("\n") + 1:  # NFKC never makes or removes a "\n"; this guards that assumption
        raise ValueError(f"normalizing changed the line count of a text starting {text[:60]!r}")
    return lines


def host_hash(site: str) -> int:
    """The 64-bit hash a site is grouped by."""
    return xxhash.xxh3_64_intdigest(site.encode("utf-8"))


def line_keys(site: str, text: str, mask_digits: bool = True) -> UInt64[np.ndarray, " lines"]:
    """The (site, line) key of every line of `text`; 0 for a blank line (a real key is 0 with odds 2^-64)."""
    prefix = site.encode("utf-8") + b"\0"
    digest = xxhash.xxh3_64_intdigest
    return np.array(
        [digest(prefix + line.encode("utf-8")) if line else 0 for line in normalized_lines(text, mask_digits)],
        dtype=np.uint64,
    )


def without_lines(text: str, remove: Bool[np.ndarray, " lines"]) -> str:
    """`text` without the lines marked in `remove`, and without the blank lines a removal leaves doubled.

    A blank line right after a removed one is dropped when the kept text is
    empty or already ends in a blank line, so a removed paragraph leaves one
    paragraph break, not two; a text with nothing to remove comes back as is.
    """
    if not remove.any():
        return text
    kept: list[str] = []
    after_removed = False
    for line, drop in zip(text.split("\n"), remove.tolist(), strict=True):
        if drop:
            after_removed = True
            continue
        if not line.strip() and after_removed and (not kept or not kept[-1].strip()):
            continue
        after_removed = after_removed and not line.strip()
        kept.append(line)
    return "\n".join(kept).strip()
