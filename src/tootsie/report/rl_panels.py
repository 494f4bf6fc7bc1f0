"""The report's panels for an RL run: reward, KL to the reference against its bound, clipping, entropy and length.

An RL run logs `rl/` metrics into the step's record (`tootsie.rl.buffer`,
`tootsie.rl.rollout`): an iteration's rollout figures (`rl/reward_mean`,
`rl/reward_std` when some completion's reward counted, `rl/entropy`,
`rl/truncated_fraction`, `rl/mean_length`, the `rl/reason_*` counts) join its
first update's record, every update logs the policy-gradient figures
(`rl/kl`, `rl/clip_fraction`, ...; `rl/kl_bound` and `rl/kl_over_bound` when a
bound is stated), and every few iterations a record carries the greedy
`rl/heldout_exact_match`. A distillation run logs `rl/reverse_kl` in place of
the policy-gradient figures. Four panels read them:

- reward: `rl/reward_mean` with a ±`rl/reward_std` band, and the held-out
  exact match as points on the right axis, with a table of the completions'
  outcomes (`rl/reason_*`) summed over the run;
- KL: `rl/kl` (k3, nats/token) with the stated bound dashed at its logged
  value and the updates above it marked, and/or `rl/reverse_kl` for
  distillation;
- clipping: `rl/clip_fraction` and, on the right axis, `rl/advantage_std`;
- entropy and length: `rl/entropy` in one strip, `rl/mean_length` with
  `rl/truncated_fraction` on the right axis in the other.

A run without `rl/` metrics gets none of them (`rl_panels` returns nothing), and
what a run did not log is left out of its panel (a panel with nothing logged
says so), as in `moe_panels`.
"""

import numpy as np
from matplotlib.axes import Axes

from tootsie.monitor.signals import series
from tootsie.report.panels import (
    BOTTOM,
    TOP,
    Panel,
    Records,
    Table,
    Timeline,
    backdrop,
    finished,
    panel_figure,
    run_curve,
)

RL_PREFIX = "rl/"
KL, REVERSE_KL, KL_BOUND, OVER_BOUND = "rl/kl", "rl/reverse_kl", "rl/kl_bound", "rl/kl_over_bound"
REASONS = ("right", "wrong", "parse_failure", "truncated")
"""The outcomes counted per iteration as `rl/reason_<name>` (`tootsie.rl.rollout`)."""
BOUND_COLOR, OVER_COLOR = "#6b7280", "#dc2626"
ROW_HEIGHT = 1.6
"""Inches per strip of the entropy and length panel."""


def has_rl_metrics(runs: dict[str, Records]) -> bool:
    """Whether any record of any run logged an `rl/` metric."""
    return any(key.startswith(RL_PREFIX) for records in runs.values() for r in records for key in r)


def rl_panels(runs: dict[str, Records], timeline: Timeline) -> tuple[Panel, ...]:
    """The RL panels of the runs that logged `rl/` metrics, or none when no run did (a pretraining report)."""
    if not has_rl_metrics(runs):
        return ()
    return (
        reward_panel(runs, timeline),
        kl_panel(runs, timeline),
        clipping_panel(runs, timeline),
        entropy_length_panel(runs, timeline),
    )


def _logged(runs: dict[str, Records], key: str) -> bool:
    """Whether any run has a finite value of `key`."""
    return any(len(series(records, key)[1]) for records in runs.values())


def _legend(*axes: Axes) -> None:
    """One legend over the curves of the axes (a panel's left and right axis)."""
    handles = [h for axis in axes for h in axis.get_legend_handles_labels()[0]]
    labels = [label for axis in axes for label in axis.get_legend_handles_labels()[1]]
    if handles:
        axes[0].legend(handles, labels, fontsize=8, loc="upper left")


def reward_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Reward mean per run with a ±std band, and the greedy held-out exact match as points on the right axis."""
    title = "RL reward: mean ± std per iteration, held-out exact match"
    if not (_logged(runs, "rl/reward_mean") or _logged(runs, "rl/heldout_exact_match")):
        return Panel(title, None, "Neither `rl/reward_mean` nor `rl/heldout_exact_match` was logged.")
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    twin = axis.twinx() if _logged(runs, "rl/heldout_exact_match") else None
    for label, records in runs.items():
        steps, means, _ = series(records, "rl/reward_mean")
        if len(means):
            std_steps, stds, _ = series(records, "rl/reward_std")
            spread = dict(zip(std_steps.tolist(), stds.tolist()))
            band = np.array([spread.get(step, np.nan) for step in steps.tolist()])
            if np.isfinite(band).any():
                axis.fill_between(
                    steps, means - band, means + band, color=timeline.color(label), alpha=0.15, linewidth=0, gid=label
                )
            run_curve(axis, timeline, label, steps, means, linewidth=1.2, label=f"{label} reward mean".strip())
        steps, matches, _ = series(records, "rl/heldout_exact_match")
        if twin is not None and len(matches):
            run_curve(
                twin, timeline, label, steps, matches, "o", markersize=5, label=f"{label} held-out exact match".strip()
            )
    axis.set_ylabel("reward")
    if twin is not None:
        twin.set_ylabel("held-out exact match")
        twin.set_ylim(0, 1)
    _legend(axis, *([twin] if twin is not None else []))
    return finished(
        title,
        figure,
        "Solid: the mean reward of the iteration's counted completions, shaded ± their std (the spread the group"
        " advantages are made of: no spread, no signal). Points (right axis): greedy exact match on the held-out"
        " tasks, logged every few iterations; sampled reward rising while it stays flat is the policy learning the"
        " sampler, not the task.",
        _reason_table(runs),
    )


def _reason_table(runs: dict[str, Records]) -> Table | None:
    """Per run: its completions' outcomes summed over the run (the `rl/reason_*` counts), None if none was logged."""
    rows = []
    for label, records in runs.items():
        totals = [series(records, f"rl/reason_{reason}")[1] for reason in REASONS]
        if any(len(t) for t in totals):
            counts = [int(t.sum()) for t in totals]
            total = sum(counts)
            rows.append((label, *(f"{c} ({100 * c / total:.1f}%)" if total else "0" for c in counts)))
    return Table(("run", *REASONS), tuple(rows)) if rows else None


def _bounds(runs: dict[str, Records]) -> dict[float, list[str]]:
    """Each stated KL bound (the last `rl/kl_bound` a run logged) → the runs that stated it."""
    bounds: dict[float, list[str]] = {}
    for label, records in runs.items():
        _, values, _ = series(records, KL_BOUND)
        if len(values):
            bounds.setdefault(float(values[-1]), []).append(label)
    return bounds


def kl_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """`rl/kl` per run with the stated bound dashed and updates above it marked; `rl/reverse_kl` for distillation."""
    policy, distilled = _logged(runs, KL), _logged(runs, REVERSE_KL)
    if policy and distilled:
        title = "RL KL: to the reference (policy gradient) and reverse KL to the teacher (distillation)"
    elif distilled:
        title = "Distillation: reverse KL(student ‖ teacher)"
    else:
        title = "RL KL to the reference and its stated bound"
    if not (policy or distilled):
        return Panel(title, None, f"Neither `{KL}` nor `{REVERSE_KL}` was logged.")
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    over = 0
    for label, records in runs.items():
        for key, style in ((KL, "-"), (REVERSE_KL, "--")):
            steps, values, _ = series(records, key)
            if len(values):
                run_curve(axis, timeline, label, steps, values, style, linewidth=1.2, label=f"{label} {key}".strip())
        flag_steps, flags, _ = series(records, OVER_BOUND)
        kl_steps, kls, _ = series(records, KL)
        above = np.isin(kl_steps, flag_steps[flags > 0.5])
        over += int(above.sum())
        if above.any():
            axis.plot(kl_steps[above], kls[above], "v", color=OVER_COLOR, markersize=6)
    bounds = _bounds(runs)
    for value, labels in bounds.items():
        axis.axhline(value, color=BOUND_COLOR, linestyle="--", linewidth=1.2)
        named = f" ({', '.join(labels)})" if len(bounds) > 1 else ""
        transform = axis.get_yaxis_transform()
        axis.text(0.995, value, f"bound {value:g}{named} ", transform=transform, ha="right", va="bottom", fontsize=8)
    axis.set_ylim(bottom=0)
    axis.set_ylabel("nats / token")
    axis.legend(fontsize=8, loc="upper left")
    notes = []
    if policy:
        notes.append(
            f"Solid: `{KL}`, the k3 estimate of KL(policy ‖ reference) in mean nats per completion token, per update"
            " (what the KL penalty pulls down)."
        )
        notes.append(
            f"Dashed grey: the stated bound (`{KL_BOUND}`); red marks: the {over} update(s) above it."
            if bounds
            else "No bound was stated (`rl.kl_bound` unset)."
        )
    if distilled:
        notes.append(f"Dashed: `{REVERSE_KL}`, KL(student ‖ teacher) per completion token, the distillation loss.")
    return finished(title, figure, " ".join(notes), _kl_table(runs))


def _kl_table(runs: dict[str, Records]) -> Table | None:
    """Per run that logged `rl/kl`: its largest value, the stated bound and how many updates went above it."""
    rows = []
    for label, records in runs.items():
        _, kls, _ = series(records, KL)
        if len(kls):
            _, bound, _ = series(records, KL_BOUND)
            _, flags, _ = series(records, OVER_BOUND)
            stated = f"{bound[-1]:g}" if len(bound) else "none"
            rows.append((label, f"{kls.max():.4g}", stated, str(int((flags > 0.5).sum())), str(len(kls))))
    return Table(("run", f"max {KL}", "bound", "updates above", "updates"), tuple(rows)) if rows else None


def clipping_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """The clipped fraction of the ratio per run and, on the right axis, the advantages' std."""
    title = "RL clipping: clip fraction and advantage std"
    if not (_logged(runs, "rl/clip_fraction") or _logged(runs, "rl/advantage_std")):
        return Panel(title, None, "Neither `rl/clip_fraction` nor `rl/advantage_std` was logged.")
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    twin = axis.twinx()
    for label, records in runs.items():
        for target, key, style in ((axis, "rl/clip_fraction", "-"), (twin, "rl/advantage_std", ":")):
            steps, values, _ = series(records, key)
            if len(values):
                run_curve(target, timeline, label, steps, values, style, linewidth=1.2, label=f"{label} {key}".strip())
    axis.set_ylim(bottom=0)
    axis.set_ylabel("clip fraction")
    twin.set_ylim(bottom=0)
    twin.set_ylabel("advantage std (dotted)")
    _legend(axis, twin)
    return finished(
        title,
        figure,
        "Solid: the share of completion tokens whose probability ratio to the rollout policy was clipped (0 with one"
        " update per iteration: the ratio is 1). Dotted, right axis: the std of the counted completions' advantages;"
        " near 0 when every group's completions got the same reward, which leaves no gradient.",
    )


def entropy_length_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Policy entropy in one strip; mean completion length with the truncated fraction (right axis) in another."""
    title = "RL rollouts: entropy, mean completion length and truncated fraction"
    entropy = _logged(runs, "rl/entropy")
    length = _logged(runs, "rl/mean_length") or _logged(runs, "rl/truncated_fraction")
    if not (entropy or length):
        return Panel(title, None, "None of `rl/entropy`, `rl/mean_length`, `rl/truncated_fraction` was logged.")
    strips = int(entropy) + int(length)
    figure, first = panel_figure(BOTTOM + TOP + ROW_HEIGHT * strips)
    axes = [first] if strips == 1 else list(figure.subplots(strips, 1, sharex=True))
    if strips > 1:
        first.remove()
    if entropy:
        _entropy_strip(axes[0], runs, timeline)
    if length:
        _length_strip(axes[-1], runs, timeline)
    for axis in axes[:-1]:
        axis.set_xlabel("")
    return finished(
        title,
        figure,
        "Entropy: the sampled completions' mean per-token entropy; a collapse toward 0 is a policy that stopped"
        " exploring. Length (solid) with the share of completions cut at max_new_tokens (dotted, right axis):"
        " lengths climbing into the cap are the policy learning to ramble, and truncated completions score as"
        " `rewards.truncated` says.",
    )


def _entropy_strip(axis: Axes, runs: dict[str, Records], timeline: Timeline) -> None:
    """`rl/entropy` per run."""
    backdrop(axis, timeline)
    for label, records in runs.items():
        steps, values, _ = series(records, "rl/entropy")
        if len(values):
            run_curve(axis, timeline, label, steps, values, linewidth=1.2, label=label or None)
    axis.set_ylabel("entropy\n(nats/token)", fontsize=8)
    if len(runs) > 1:
        axis.legend(fontsize=8, loc="upper left")


def _length_strip(axis: Axes, runs: dict[str, Records], timeline: Timeline) -> None:
    """`rl/mean_length` per run, and `rl/truncated_fraction` on a right axis from 0 to 1."""
    backdrop(axis, timeline)
    twin = axis.twinx()
    for label, records in runs.items():
        for target, key, style in ((axis, "rl/mean_length", "-"), (twin, "rl/truncated_fraction", ":")):
            steps, values, _ = series(records, key)
            if len(values):
                run_curve(target, timeline, label, steps, values, style, linewidth=1.2, label=f"{label} {key}".strip())
    axis.set_ylim(bottom=0)
    axis.set_ylabel("mean length\n(tokens)", fontsize=8)
    twin.set_ylim(0, 1)
    twin.set_ylabel("truncated\nfraction", fontsize=8)
    _legend(axis, twin)
