"""Compare two prefixes step by step through their output manifests: one hash must name one content.

Usage: python scripts/compare_prefixes.py PREFIX_A PREFIX_B [--json]

For every step directory (`<name>-<hash>`, found by its `.executor_manifest.json`)
in either prefix, prints whether both have it, both manifests' digests, and the
files whose sha256 differ (volatile files left out); for a step that differs,
also what its two `.executor_info.json` files say about the code and machine
that made it (tootsie commit, Python, key package versions, CPU count), since the step
hash names neither. Exits 1 if any step present in both differs or is missing
from one side. Used to show that the demo run from
two clones in different directories, with separate venvs and prefixes, gives
byte-identical outputs (docs/reproducibility.md).
"""

import argparse
import json
import os
import sys

from tootsie.executor.manifest import MANIFEST_FILE, Manifest, differing, read_manifest
from tootsie.executor.metadata import INFO_FILE
from tootsie.jsonfile import read_json

PRODUCER_FIELDS = ("tootsie_version", "git", "python", "packages", "cpus")
"""What `.executor_info.json` says about the code and machine that made a step; shown where two copies differ."""


def manifests(prefix: str) -> dict[str, Manifest]:
    """Step id ("<name>-<hash>") -> manifest, for every step directory under the local `prefix`."""
    found = {}
    for base, dirs, files in os.walk(prefix):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if MANIFEST_FILE in files:
            manifest = read_manifest(base)
            if manifest is not None:
                found[os.path.relpath(base, prefix).replace(os.sep, "/")] = manifest
            dirs[:] = []
    return found


def producer_differences(left: str, right: str) -> dict[str, list[object]]:
    """Field -> [left value, right value] for each producer field of two step directories' metadata that differs."""
    a, b = (read_json(os.path.join(d, INFO_FILE)) or {} for d in (left, right))
    return {f: [a.get(f), b.get(f)] for f in PRODUCER_FIELDS if a.get(f) != b.get(f)}


def compare(left: str, right: str) -> list[dict[str, object]]:
    """One row per step id in either prefix: digests, files compared, and the differing paths."""
    a, b = manifests(left), manifests(right)
    rows = []
    for step in sorted(set(a) | set(b)):
        one, two = a.get(step), b.get(step)
        diff = differing(one, two) if one is not None and two is not None else []
        both = one is not None and two is not None
        producers = producer_differences(os.path.join(left, step), os.path.join(right, step)) if diff and both else {}
        rows.append(
            {
                "step": step,
                "digest_a": None if one is None else one.digest,
                "digest_b": None if two is None else two.digest,
                "files": len((one or two).compared),  # type: ignore[union-attr]
                "volatile": sorted({e.path for m in (one, two) if m is not None for e in m.files if e.volatile}),
                "identical": one is not None and two is not None and not diff,
                "differing": diff,
                "producers": producers,
            }
        )
    return rows


def main() -> int:
    """Print the table (or JSON) and return 0 when every step is identical on both sides."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("prefix_a")
    parser.add_argument("prefix_b")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    rows = compare(args.prefix_a, args.prefix_b)
    if args.json:
        print(json.dumps({"steps": rows, "identical": all(r["identical"] for r in rows)}))
    else:
        print("| step | files | digest A | digest B | identical | volatile (not compared) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for row in rows:
            short = [str(d)[:12] if d else "missing" for d in (row["digest_a"], row["digest_b"])]
            mark = "yes" if row["identical"] else f"NO: {', '.join(row['differing']) or 'missing on one side'}"
            volatile = ", ".join(row["volatile"]) or "-"  # type: ignore[arg-type]
            print(f"| {row['step']} | {row['files']} | {short[0]} | {short[1]} | {mark} | {volatile} |")
        for row in rows:
            for field, (a, b) in row["producers"].items():  # type: ignore[union-attr]
                print(f"{row['step']}: made with different {field}: {a} vs {b}")
    return 0 if rows and all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
