"""The report's panels for a mixture-of-experts run: where the router sends tokens, what it drops, what it costs.

An MoE run logs `moe/` metrics every step (`tootsie.models.moe.router_metrics`):
each MoE block's expert loads as a [layers][experts] list, and scalars averaged
over the MoE blocks (dropped fraction, the busiest expert's share, the
load-balancing and z losses, the router entropy). Three panels read them:

- the expert-load heatmap: blocks up, experts across, each cell the expert's
  share as a multiple of the uniform 1/E (white balanced, red overloaded, blue
  starved), at up to `SNAPSHOTS` logged steps, the last the latest, one strip
  per run, with a table naming each block's busiest and idlest expert;
- drops and balance over steps: `moe/dropped_fraction` and `moe/max_load`,
  with 1/E dotted (the max load of a perfectly balanced router);
- the router's losses over steps: `moe/load_balancing_loss` (1.0 dotted, its
  value at uniform load), `moe/router_entropy` (log E dotted, a uniform
  router), and `moe/router_z_loss` on the right axis.

A run without `moe/` metrics gets none of them (`moe_panels` returns nothing),
so a dense run's report has no empty MoE sections.
"""

import math

import numpy as np
from matplotlib import colors
from matplotlib.axes import Axes

from tootsie.monitor.signals import EXPERT_LOAD, ExpertLoad, expert_loads, series
from tootsie.report.panels import (
    BOTTOM,
    RIGHT,
    TOP,
    WIDTH,
    Panel,
    Records,
    Table,
    Timeline,
    backdrop,
    finished,
    panel_figure,
    run_curve,
)

MOE_PREFIX = "moe/"
SNAPSHOTS = 4
"""Logged steps shown side by side in the expert-load heatmap, evenly spaced, the last the latest."""
STRIP_HEIGHT = 0.3
"""Inches per MoE block in a run's heatmap strip (at least `MIN_STRIP` inches a strip)."""
MIN_STRIP = 1.4
ANNOTATE_CELLS = 128
"""Cells of one snapshot up to which each cell is labelled with its multiple of the uniform share."""
UNIFORM_COLOR = "#6b7280"


def has_moe_metrics(runs: dict[str, Records]) -> bool:
    """Whether any record of any run logged an `moe/` metric."""
    return any(key.startswith(MOE_PREFIX) for records in runs.values() for r in records for key in r)


def moe_panels(runs: dict[str, Records], timeline: Timeline, first_block: dict[str, int]) -> tuple[Panel, ...]:
    """The MoE panels of the runs that logged `moe/` metrics, or none when no run did.

    `first_block`: run label → the index of its first MoE block (its `dense_layers`), so heatmap rows are
    numbered as the model's blocks.
    """
    if not has_moe_metrics(runs):
        return ()
    loads = {label: found for label, found in ((k, expert_loads(v, SNAPSHOTS)) for k, v in runs.items()) if found}
    experts = {load[-1].num_experts for load in loads.values()}
    num_experts = experts.pop() if len(experts) == 1 else None
    return (
        expert_load_panel(loads, first_block, timeline.x_label),
        routing_panel(runs, timeline, num_experts),
        router_loss_panel(runs, timeline, num_experts),
    )


def _relative(load: ExpertLoad) -> np.ma.MaskedArray:
    """Shares as multiples of the uniform share (1.0 = balanced), damaged entries masked."""
    return np.ma.masked_invalid(load.shares * load.num_experts)


def expert_load_panel(
    loads: dict[str, tuple[ExpertLoad, ...]], first_block: dict[str, int], x_label: str = "step"
) -> Panel:
    """Per-block expert load (share × E) at a few steps, one strip per run, and each block's extremes at the last.

    `x_label` names what a record's `step` holds (`tokens` when the report is drawn against tokens).
    """
    title = "MoE expert load per block (share of routed slots × experts)"
    if not loads:
        return Panel(title, None, f"`{EXPERT_LOAD}` was not logged (only the averaged `moe/` scalars were).")
    columns = max(len(found) for found in loads.values())
    heights = [max(MIN_STRIP, STRIP_HEIGHT * found[-1].shares.shape[0]) for found in loads.values()]
    height = BOTTOM + TOP + sum(heights) + 0.35 * (len(loads) - 1)
    figure, first = panel_figure(height)
    first.remove()
    grid = figure.add_gridspec(len(loads), columns, height_ratios=heights, hspace=0.45, wspace=0.08)
    largest = max(float(_relative(load).max()) for found in loads.values() for load in found)
    scale = colors.TwoSlopeNorm(vmin=0.0, vcenter=1.0, vmax=max(2.0, largest if math.isfinite(largest) else 2.0))
    palette = colors.LinearSegmentedColormap.from_list("load", ["#2563eb", "#ffffff", "#dc2626"]).with_extremes(
        bad="#d1d5db"
    )  # blue starved, white even, red overloaded; grey a damaged entry
    image = None
    for row, (label, found) in enumerate(loads.items()):
        offset = first_block.get(label, 0)
        for column, load in enumerate(found):
            axis = figure.add_subplot(grid[row, column])
            relative = _relative(load)
            layers, experts = relative.shape
            image = axis.imshow(
                relative, cmap=palette, norm=scale, aspect="auto", origin="lower", interpolation="nearest", gid=label
            )
            if layers * experts <= ANNOTATE_CELLS:
                for (layer, expert), value in np.ndenumerate(relative.filled(np.nan)):
                    if math.isfinite(value):
                        axis.text(expert, layer, f"{value:.1f}", ha="center", va="center", fontsize=7)
            axis.set_title(f"{label} {x_label} {load.step}".strip(), fontsize=8)
            axis.set_xticks(range(experts) if experts <= 16 else np.linspace(0, experts - 1, 9).round())
            axis.tick_params(labelsize=7)
            ticks = range(layers) if layers <= 12 else np.linspace(0, layers - 1, 7).round().astype(int)
            axis.set_yticks(list(ticks), [str(offset + int(t)) for t in ticks] if column == 0 else [])
            if column == 0:
                axis.set_ylabel("block", fontsize=8)
            if row == len(loads) - 1:
                axis.set_xlabel("expert", fontsize=8)
    if image is not None:
        bar = figure.add_axes((1 - (RIGHT - 0.1) / WIDTH, BOTTOM / height, 0.1 / WIDTH, 1 - (BOTTOM + TOP) / height))
        figure.colorbar(image, cax=bar)
    return finished(
        title,
        figure,
        "Each cell is an expert's share of its block's routed token-slots (before drops) times the number of"
        " experts: 1.0 (white) is an even share, 2.0 (red) twice it, 0 (blue) an expert nobody picks."
        f" Columns: up to {SNAPSHOTS} logged steps, evenly spaced, the last the latest; one step's batch is noisy,"
        " so read a block that stays red across columns. Blocks are numbered as in the model (dense blocks first).",
        _extremes_table(loads, first_block, x_label),
    )


def _extremes_table(loads: dict[str, tuple[ExpertLoad, ...]], first_block: dict[str, int], x_label: str) -> Table:
    """Per run and block at its latest logged step: the busiest and the idlest expert with their shares."""
    rows = []
    for label, found in loads.items():
        latest = found[-1]
        for layer, shares in enumerate(latest.shares):
            if not np.isfinite(shares).any():
                continue
            busiest, idlest = int(np.nanargmax(shares)), int(np.nanargmin(shares))
            rows.append(
                (
                    label,
                    str(latest.step),
                    str(first_block.get(label, 0) + layer),
                    f"{busiest} ({100 * shares[busiest]:.1f}%)",
                    f"{idlest} ({100 * shares[idlest]:.1f}%)",
                    f"{100 / latest.num_experts:.1f}%",
                )
            )
    return Table(("run", x_label, "block", "busiest expert", "idlest expert", "even share"), tuple(rows))


def _uniform_line(axis: Axes, value: float, text: str) -> None:
    """A dotted horizontal reference line named at the right end."""
    axis.axhline(value, color=UNIFORM_COLOR, linestyle=":", linewidth=1.2)
    low, high = axis.get_ylim()
    side = "top" if value > (low + high) / 2 else "bottom"  # inside the axes, clear of its frame
    transform = axis.get_yaxis_transform()
    axis.text(0.995, value, f"{text} ", transform=transform, ha="right", va=side, fontsize=8, color="#374151")


def routing_panel(runs: dict[str, Records], timeline: Timeline, num_experts: int | None) -> Panel:
    """Dropped fraction (solid) and the busiest expert's share (dashed) per run, with 1/E dotted."""
    title = "MoE drops and balance: dropped fraction and max expert load"
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    drawn = False
    for label, records in runs.items():
        for key, style in (("moe/dropped_fraction", "-"), ("moe/max_load", "--")):
            steps, values, _ = series(records, key)
            if len(values):
                drawn = True
                run_curve(axis, timeline, label, steps, values, style, linewidth=1.2, label=f"{label} {key}".strip())
    if not drawn:
        return Panel(title, None, "Neither `moe/dropped_fraction` nor `moe/max_load` was logged.")
    if num_experts:
        _uniform_line(axis, 1 / num_experts, f"1/E = {1 / num_experts:.3g} (even load)")
    axis.set_ylim(bottom=0)
    axis.set_ylabel("share of routed slots")
    axis.legend(fontsize=8, loc="upper right")
    return finished(
        title,
        figure,
        "Solid: token-slots dropped at expert capacity over slots routed (dropped slots keep only the residual);"
        " dashed: the busiest expert's share (1/E when balanced, at most 1/k: a token picks k different experts)."
        " Both averaged over MoE blocks. Drops are 0 when capacity_factor is null (dropless) or ≥ E/k."
        " Max load rising while the load-balancing loss is off or small is the router collapsing.",
    )


ROUTER_ROWS = (
    ("moe/load_balancing_loss", "load balancing\nE·Σ f·P"),
    ("moe/router_entropy", "router entropy\n(nats)"),
    ("moe/router_z_loss", "router z-loss\nlogsumexp²"),
)
"""The router panel's strips, top to bottom: metric and y label."""
ROW_HEIGHT = 1.25
"""Inches per strip of the router panel."""


def router_loss_panel(runs: dict[str, Records], timeline: Timeline, num_experts: int | None) -> Panel:
    """Load-balancing loss, router entropy and router z-loss per run, one strip each on the shared step axis."""
    title = "MoE router: load-balancing loss, router entropy and z-loss"
    logged = [(key, name) for key, name in ROUTER_ROWS if any(len(series(r, key)[1]) for r in runs.values())]
    if not logged:
        return Panel(title, None, "No router loss or entropy was logged.")
    figure, first = panel_figure(BOTTOM + TOP + ROW_HEIGHT * len(logged))
    axes = [first] if len(logged) == 1 else list(figure.subplots(len(logged), 1, sharex=True))
    if len(logged) > 1:
        first.remove()
    references = {"moe/load_balancing_loss": (1.0, "even load: 1")}
    if num_experts:
        references["moe/router_entropy"] = (
            math.log(num_experts),
            f"uniform router: log E = {math.log(num_experts):.2f}",
        )
    for axis, (key, name) in zip(axes, logged):
        backdrop(axis, timeline)
        for label, records in runs.items():
            steps, values, _ = series(records, key)
            if len(values):
                run_curve(axis, timeline, label, steps, values, linewidth=1.2, label=label or None)
        if key in references:
            _uniform_line(axis, *references[key])
        axis.set_ylabel(name, fontsize=8)
        if axis is not axes[-1]:
            axis.set_xlabel("")
    if len(runs) > 1:
        axes[0].legend(fontsize=8, loc="upper left")
    return finished(
        title,
        figure,
        "Unweighted values, each a mean over MoE blocks (the objective multiplies them by load_balancing_weight"
        " and router_z_loss_weight). Load balancing is 1.0 at an even load, up to E/k when every token picks the"
        " same k experts with all the router's probability on them; an entropy"
        " near log E is a router that has not chosen yet, a falling one a router growing confident; a growing"
        " z-loss means the router logits are growing (its weight keeps them in check).",
    )
