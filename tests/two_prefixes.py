"""Run a step under two prefixes and return its two output directories: "one hash, one content" in tests.

The second prefix lies one directory deeper, so paths differ in length as well
as in name. A test then compares the two outputs' manifests
(`executor.manifest.differing`) and reads what the step recorded.
"""

from pathlib import Path
from typing import Any

from tootsie.executor import Step, build_graph, run_experiment
from tootsie.executor.graph import Graph
from tootsie.executor.manifest import Manifest, read_manifest


def run_under_two_prefixes(step: Step[Any], root: Path) -> list[tuple[Graph, Path, Manifest]]:
    """`(graph, output directory, manifest)` of `step` run (with its inputs) under `root/a` and `root/elsewhere/b`."""
    runs = []
    for prefix in (root / "a", root / "elsewhere" / "b"):
        report = run_experiment([step], prefix)
        assert report.ok, [(s.name, s.error) for s in report.steps]
        graph = build_graph([step], prefix)
        out = Path(graph.node(step).output_path)
        runs.append((graph, out, read_manifest(str(out))))
    return runs
