"""Ranking microanneal branches against the control, with seed-repeat noise bars, and the figure.

`rank_candidates` is pure: given each branch's held-out BPB per seed (the
`summarize` dicts: per domain, `macro_avg`, `micro_avg`), a candidate's
`delta_vs_control` is the mean of its macro BPB over seeds minus the
control's (negative = better), and its `noise` is the standard error of that
difference, `sqrt(s_c^2 / n_c + s_0^2 / n_0)` with the seeds' sample
standard deviations. A candidate is `above_noise` when it beats the control
by more than `noise_sigmas` standard errors; with one seed per branch there is
no noise estimate (`noise` is null) and no candidate is called above it.
Candidates are ranked by `delta_vs_control`, best first; per-domain deltas
show which held-out domain a candidate helps. Benchmark tasks, when the
branches ran them, are averaged over seeds per `<task>/<format>/<metric>`
and reported beside the BPB with their difference from the control.

Example: control macro BPB over three seeds 2.50, 2.52, 2.51 and a candidate's
2.30, 2.31, 2.29 give delta -0.21, noise 0.0082 and above_noise (0.21 > 2 x 0.0082).
"""

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json
from tootsie.recipes.cases.common import write_results

MACRO = "macro_avg"
AVERAGES = ("macro_avg", "micro_avg")


def _squared_stderr(values: list[float]) -> float | None:
    """Squared standard error of a mean (sample variance / n); None below two values."""
    return float(np.var(values, ddof=1)) / len(values) if len(values) >= 2 else None


def _task_means(runs: list[dict[str, float]]) -> dict[str, float]:
    """Mean over seeds of every task value all seeds report."""
    keys = set.intersection(*(set(run) for run in runs)) if runs else set()
    return {key: float(np.mean([run[key] for run in runs])) for key in sorted(keys)}


def rank_candidates(
    bpb: dict[str, list[dict[str, float]]],
    control: str = "control",
    noise_sigmas: float = 2.0,
    tasks: dict[str, list[dict[str, float]]] | None = None,
) -> dict[str, Any]:
    """The control's mean BPB and every candidate's mean, delta, noise and rank (see the module docstring).

    `tasks` (branch → per seed `{task key: value}`) adds each candidate's mean task values and deltas.
    """
    if control not in bpb or not bpb[control]:
        raise TootsieError(f"no BPB results for the control branch {control!r}; branches: {sorted(bpb)}")
    domains = sorted(key for key in bpb[control][0] if key not in AVERAGES)

    def means(runs: list[dict[str, float]]) -> dict[str, float]:
        return {key: float(np.mean([run[key] for run in runs])) for key in [*domains, *AVERAGES]}

    tasks = tasks or {}
    base_tasks = _task_means(tasks.get(control, []))
    base = means(bpb[control])
    base_var = _squared_stderr([run[MACRO] for run in bpb[control]])
    candidates = []
    for name, runs in bpb.items():
        if name == control:
            continue
        own = means(runs)
        own_var = _squared_stderr([run[MACRO] for run in runs])
        noise = math.sqrt(own_var + base_var) if own_var is not None and base_var is not None else None
        delta = own[MACRO] - base[MACRO]
        candidates.append(
            {
                "name": name,
                "bpb_macro": own[MACRO],
                "delta_vs_control": delta,
                "noise": noise,
                "above_noise": noise is not None and -delta > noise_sigmas * noise,
                "seeds": len(runs),
                "bpb_macro_per_seed": [run[MACRO] for run in runs],
                "bpb": own,
                "delta_by_domain": {domain: own[domain] - base[domain] for domain in domains},
                "tasks": {
                    key: {"value": value, "delta_vs_control": value - base_tasks[key] if key in base_tasks else None}
                    for key, value in _task_means(tasks.get(name, [])).items()
                },
            }
        )
    candidates.sort(key=lambda c: c["delta_vs_control"])
    for rank, candidate in enumerate(candidates, start=1):
        candidate["rank"] = rank
    return {
        "control": {
            "name": control,
            "bpb_macro": base[MACRO],
            "bpb": base,
            "seeds": len(bpb[control]),
            "bpb_macro_per_seed": [run[MACRO] for run in bpb[control]],
            "tasks": base_tasks,
        },
        "candidates": candidates,
        "domains": domains,
        "noise_sigmas": noise_sigmas,
        "best": next((c["name"] for c in candidates if c["above_noise"]), None),
    }


@dataclass(frozen=True)
class RankConfig:
    """Every branch's per-seed `bpb.json` and how to judge them."""

    bpb: dict[str, dict[str, str]]
    """Branch → seed → the `bpb.json` of its anneal's final checkpoint (label "final")."""
    tasks: dict[str, dict[str, str]]
    """Branch → seed → its `tasks.json` ({} when the spec runs no tasks)."""
    control: str
    """The control branch's name."""
    noise_sigmas: float
    """Standard errors a gain must exceed to count."""
    weights: dict[str, dict[str, float]]
    """Branch → its mixture weights (recorded in results.json)."""


def _figure(results: dict[str, Any]) -> Figure:
    """Left: macro BPB delta per candidate with +-noise_sigmas bars; right: per-domain deltas."""
    candidates, domains = results["candidates"], results["domains"]
    figure = Figure(figsize=(11, 4.2))
    left, right = figure.subplots(1, 2)
    names = [c["name"] for c in candidates]
    deltas = [c["delta_vs_control"] for c in candidates]
    bars = [results["noise_sigmas"] * (c["noise"] or 0.0) for c in candidates]
    colors = ["tab:green" if c["above_noise"] else "tab:gray" for c in candidates]
    left.bar(names, deltas, yerr=bars, color=colors, capsize=4)
    left.axhline(0, color="black", linewidth=1)
    left.set_ylabel("macro BPB - control (lower is better)")
    left.set_title(f"rank vs control (bars: ±{results['noise_sigmas']:g} s.e. over seeds)", fontsize=9)
    width = 0.8 / max(len(domains), 1)
    for index, domain in enumerate(domains):
        right.bar(
            np.arange(len(names)) + (index - (len(domains) - 1) / 2) * width,
            [c["delta_by_domain"][domain] for c in candidates],
            width,
            label=domain,
        )
    right.set_xticks(np.arange(len(names)), names)
    right.axhline(0, color="black", linewidth=1)
    right.set_ylabel("domain BPB - control")
    right.set_title("per held-out domain", fontsize=9)
    right.legend(fontsize=8)
    figure.suptitle(f"microanneal: control macro BPB {results['control']['bpb_macro']:.4f}", fontsize=10)
    figure.tight_layout()
    return figure


def rank_microanneal(config: RankConfig, output_path: str) -> dict[str, Any]:
    """Read every branch's BPB, rank the candidates, write `results.json` and `figure.png`."""
    bpb: dict[str, list[dict[str, float]]] = {}
    for branch, seeds in config.bpb.items():
        bpb[branch] = []
        for seed, path in sorted(seeds.items()):
            record = read_json(path)
            if not record or "final" not in record:
                raise TootsieError(f"{path} holds no 'final' BPB for branch {branch!r} seed {seed}; rerun its bpb step")
            bpb[branch].append(record["final"])
    tasks = {
        branch: [(read_json(path) or {}).get("values", {}) for _, path in sorted(seeds.items())]
        for branch, seeds in config.tasks.items()
    }
    results = rank_candidates(bpb, config.control, config.noise_sigmas, tasks)
    results["weights"] = config.weights
    return write_results(output_path, results, _figure(results))
