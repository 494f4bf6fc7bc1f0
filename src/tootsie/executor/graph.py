"""Dependency discovery: from the steps an experiment lists to every step they reach, hashed, in run order.

An experiment lists some steps; every step reachable through a StepRef in a
config is included too. Steps are visited depth first, so each step comes after
all of its inputs, and hashed in that order, so an input's hash is known when
the steps reading it are hashed. Two Step objects with the same name and the
same version are one node (one output directory); two steps with the same name
and different configs are two nodes with two outputs. A cycle is an error.
"""

import dataclasses
import functools
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.executor.hashing import canonical, hash_json, step_id, version
from tootsie.executor.step import Step, StepRef, find_refs, map_refs


@dataclasses.dataclass(frozen=True)
class Node:
    """One step version: what it is, its hash and where its output goes."""

    step: Step[Any]
    """The first Step object seen with this name and version."""
    hash: str
    """First 12 hex characters of the sha256 of the canonical version."""
    version: dict[str, Any]
    """{"name", "config" (canonical, hashed fields only), "dependencies" (id -> hash)}."""
    full_config: dict[str, Any]
    """Canonical config including `unhashed()` fields, for the metadata file."""
    output_path: str
    """`<prefix>/<name>-<hash>`: an absolute local path, or a URL when the prefix is one."""
    dependencies: tuple[str, ...]
    """Ids of the direct inputs, without repeats, in the order the config mentions them."""

    @property
    def id(self) -> str:
        """ "<name>-<hash>", unique per step version."""
        return step_id(self.step, self.hash)


@dataclasses.dataclass(frozen=True)
class Graph:
    """All steps of an experiment, inputs before readers, with their output paths under `prefix`."""

    prefix: str
    """Absolute directory, or URL without a trailing slash (s3://bucket/runs), that holds every output."""
    nodes: tuple[Node, ...]
    """Topological order: every node comes after the nodes it reads."""
    ids: Mapping[Step[Any], str]
    """Node id of every Step object reached, including duplicates of the same version."""

    def node(self, step: Step[Any]) -> Node:
        """The node of `step` (any Step object reached while building the graph)."""
        return self.by_id[self.ids[step]]

    @functools.cached_property
    def by_id(self) -> dict[str, Node]:
        """Nodes keyed by id."""
        return {node.id: node for node in self.nodes}

    def input_names(self, node: Node, among: Collection[str]) -> list[str]:
        """Names of `node`'s direct inputs whose ids are in `among` (e.g. the failed ones), in config order."""
        return [self.by_id[dep].step.name for dep in node.dependencies if dep in among]

    def ref_path(self, ref: StepRef) -> str:
        """The string path a StepRef resolves to: `<output path>[/<subpath>]`."""
        base = self.node(ref.step).output_path
        return f"{base}/{ref.subpath}" if ref.subpath else base

    def resolved_config(self, node: Node) -> Any:
        """`node`'s config with every StepRef replaced by its path string (a copy; the original is untouched)."""
        return map_refs(node.step.config, self.ref_path)


def build_graph(steps: Sequence[Step[Any]], prefix: str | os.PathLike[str]) -> Graph:
    """Discover, hash and order every step reachable from `steps`, with outputs under `prefix`."""
    root = storage.normalize_prefix(prefix)
    hashes: dict[Step[Any], str] = {}
    nodes: dict[str, Node] = {}
    visiting: list[Step[Any]] = []

    def visit(step: Step[Any]) -> None:
        if step in hashes:
            return
        if step in visiting:
            cycle = [s.name for s in visiting[visiting.index(step) :]] + [step.name]
            raise TootsieError(
                f"steps form a cycle: {' -> '.join(cycle)}; "
                "a step cannot read its own output, directly or through others"
            )
        visiting.append(step)
        refs = find_refs(step.config)
        for ref in refs:
            visit(ref.step)
        visiting.pop()
        step_version = version(step, hash_of=hashes.__getitem__)
        step_hash = hash_json(step_version)
        hashes[step] = step_hash
        node_id = step_id(step, step_hash)
        if node_id not in nodes:
            nodes[node_id] = Node(
                step=step,
                hash=step_hash,
                version=step_version,
                full_config=canonical(step.config, hash_of=hashes.__getitem__, include_unhashed=True),
                output_path=storage.join(root, node_id),
                dependencies=tuple(dict.fromkeys(step_id(r.step, hashes[r.step]) for r in refs)),
            )

    for index, step in enumerate(steps):
        if not isinstance(step, Step):
            raise TootsieError(f"steps[{index}] is a {type(step).__name__}, not a tootsie.executor.Step")
        visit(step)
    return Graph(prefix=root, nodes=tuple(nodes.values()), ids={s: step_id(s, h) for s, h in hashes.items()})


def step_hash(step: Step[Any]) -> str:
    """The 12-hex-character version hash of `step` (its name, config and inputs' hashes)."""
    return build_graph([step], ".").node(step).hash


def output_path(step: Step[Any], prefix: str | os.PathLike[str]) -> str:
    """Output directory of `step` under `prefix` (a directory or a URL): `<prefix>/<name>-<hash>`."""
    return build_graph([step], prefix).node(step).output_path
