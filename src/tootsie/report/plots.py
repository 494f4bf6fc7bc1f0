"""Training-curve plots written as PNG files (matplotlib, no display needed)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first


def plot_loss_curves(runs: dict[str, list[dict[str, object]]], path: Path, metric: str = "loss") -> Path:
    """One line per run of `metric` against step, written to `path`."""
    figure, axis = plt.subplots(figsize=(8, 4.5), dpi=110)
    for label, records in runs.items():
        points = [(r["step"], r[metric]) for r in records if isinstance(r.get(metric), (int, float))]
        if points:
            steps, values = zip(*points)
            axis.plot(steps, values, label=label, linewidth=1.2)
    axis.set_xlabel("step")
    axis.set_ylabel(metric)
    axis.set_title(f"train {metric}")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    figure.savefig(tmp)
    plt.close(figure)
    tmp.replace(path)
    return path
