"""Figures of a scaling fit, drawn from the fit file alone: isoflop curves, and the laws in compute.

`plot_isoflops`: loss against parameters per budget, the runs as points, each
budget's parabola in log N and its minimum. `plot_laws`: the isoflop minima
against compute with every law of the fit (free E, each fixed E) and their bootstrap bands
(extended one decade past the last budget, where predictions live), and
`N_opt(C)`, `D_opt(C)` on log-log axes.
"""

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first

COLORS = plt.get_cmap("viridis")
LAW_COLORS = plt.get_cmap("tab10")
"""One color per law (free, fixed, then each further fixed E)."""


def _save(figure: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    figure.tight_layout()
    figure.savefig(tmp)
    plt.close(figure)
    tmp.replace(path)
    return path


def _finish_axis(axis: plt.Axes, *, xlabel: str, title: str, ylabel: str | None = None, log_y: bool = False) -> None:
    """Every scaling axis: compute or parameters on a log x axis, its labels, a light grid and the legend."""
    axis.set_xscale("log")
    if log_y:
        axis.set_yscale("log")
    axis.set_xlabel(xlabel)
    if ylabel is not None:
        axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)


def plot_isoflops(fit: dict[str, object], path: Path) -> Path:
    """Loss against N per budget with its parabola and minimum."""
    figure, axis = plt.subplots(figsize=(7, 4.5), dpi=110)
    budgets = fit["budgets"]
    for index, budget in enumerate(budgets):
        color = COLORS(index / max(len(budgets) - 1, 1))
        params = np.array([run["params"] for run in budget["runs"]])
        losses = np.array([run["loss"] for run in budget["runs"]])
        x = np.log(params)
        coefficients = np.polyfit(x - x.mean(), losses, 2)
        grid = np.linspace(x.min() - 0.2, x.max() + 0.2, 100)
        axis.plot(np.exp(grid), np.polyval(coefficients, grid - x.mean()), color=color, linewidth=1)
        axis.scatter(params, losses, color=color, s=18, label=f"C = {budget['compute']:.3g}")
        axis.scatter(
            [budget["params_opt"]],
            [budget["loss_opt"]],
            color=color,
            marker="*",
            s=120,
            edgecolor="black",
            linewidth=0.5,
        )
    _finish_axis(
        axis,
        xlabel="parameters N",
        ylabel="final loss",
        title="isoflop curves (star: minimum of the parabola in log N)",
    )
    return _save(figure, path)


def plot_laws(fit: dict[str, object], path: Path) -> Path:
    """L_opt(C) with both laws and bands, and N_opt(C), D_opt(C)."""
    budgets = fit["budgets"]
    compute = np.array([b["compute"] for b in budgets])
    grid = np.geomspace(compute.min() / 2, compute.max() * 10, 200)
    level = fit["config"]["level"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=110)
    low, high = np.array([b["intervals"]["loss_opt"] for b in budgets]).T
    left.errorbar(
        compute,
        [b["loss_opt"] for b in budgets],
        yerr=[[b["loss_opt"] for b in budgets] - low, high - [b["loss_opt"] for b in budgets]],
        fmt="o",
        color="black",
        label="isoflop minima",
    )
    for index, (kind, law) in enumerate(fit["laws"].items()):
        color = LAW_COLORS(index % LAW_COLORS.N)
        samples = {name: np.asarray(law["samples"][name])[:, None] for name in ("E", "A", "alpha")}
        curves = samples["E"] + samples["A"] * grid[None, :] ** -samples["alpha"]
        band = np.quantile(curves, [(1 - level) / 2, (1 + level) / 2], axis=0)
        left.fill_between(grid, band[0], band[1], color=color, alpha=0.2)
        left.plot(
            grid,
            law["E"] + law["A"] * grid ** -law["alpha"],
            color=color,
            label=f"{kind}: {law['E']:.3g} + {law['A']:.4g}·C^-{law['alpha']:.3g}",
        )
    _finish_axis(
        left,
        xlabel="compute C (FLOPs)",
        ylabel="loss at the isoflop minimum",
        title=f"L(C), {level:.0%} bootstrap bands",
    )
    for key, color, label in (("params_opt", "tab:green", "N_opt"), ("tokens_opt", "tab:red", "D_opt")):
        law = fit[key]
        right.scatter(compute, [b[key] for b in budgets], color=color)
        right.plot(
            grid,
            law["coefficient"] * grid ** law["exponent"],
            color=color,
            label=f"{label} = {law['coefficient']:.3g}·C^{law['exponent']:.3f}",
        )
    _finish_axis(right, xlabel="compute C (FLOPs)", title="compute-optimal parameters and tokens", log_y=True)
    return _save(figure, path)
