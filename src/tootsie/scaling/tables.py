"""A fit's leave-future-out checks as tables: per held-out budget, and the target prediction per training-set size.

Each table is a list of rows of cells (the first row the header), rendered as
markdown for the docs (`cross_validation_table`, `stability_table`) or as
aligned text for the terminal (`aligned`). Columns follow the fit's laws:
`free`, `fixed`, then `fixed=<E>` for each further asymptote.

Example: a fit with `--fixed-asymptote 1.6,1.7` on four budgets gives

    | held out | trained on | actual | free | fixed (E=1.6) | fixed (E=1.7) |
    | 1e+19 | 2 budgets (1e+18–3e+18) | 2.8462 | | 2.8502 (-0.0040) | 2.8391 (+0.0071) |
    ...
"""

from collections.abc import Sequence

from tootsie.errors import TootsieError
from tootsie.scaling.validation import law_keys

Rows = list[list[str]]


def _law_names(fit: dict[str, object]) -> dict[str, str]:
    """Each law key of the fit, free first then in `--fixed-asymptote` order, and its column title (`fixed (E=1.6)`)."""
    keys = [key for key in law_keys(fit["config"]["fixed_e"]) if key in fit["laws"]]
    return {key: "free" if key == "free" else f"fixed (E={fit['laws'][key]['E']:g})" for key in keys}


def _budgets(train: Sequence[float]) -> str:
    return f"{len(train)} budgets ({train[0]:.3g}–{train[-1]:.3g})"


def cross_validation_rows(fit: dict[str, object]) -> Rows:
    """Header, then one row per held-out budget: actual, and per law `predicted (error)`."""
    names = _law_names(fit)
    rows = [["held out", "trained on", "actual", *names.values()]]
    for check in fit["cross_validation"]:
        cells = [
            f"{check[key]['predicted']:.4f} ({check[key]['error']:+.4f}){'' if check[key]['within'] else ' *'}"
            if key in check
            else ""
            for key in names
        ]
        rows.append([f"{check['compute']:.3g}", _budgets(check["train_budgets"]), f"{check['actual']:.4f}", *cells])
    return rows


def stability_rows(fit: dict[str, object]) -> Rows:
    """Header, then one row per training-set size: per law the prediction at the target with its interval."""
    if "stability" not in fit:
        raise TootsieError("the fit has no stability rows; refit with --target C (the budget to predict)")
    names = _law_names(fit)
    rows = [[f"trained on (predicting {fit['stability']['target']:.3g})", *names.values()]]
    for row in fit["stability"]["rows"]:
        cells = [
            f"{row[key]['predicted']:.4f} [{row[key]['low']:.4f}, {row[key]['high']:.4f}]" if key in row else ""
            for key in names
        ]
        rows.append([_budgets(row["train_budgets"]), *cells])
    return rows


def markdown(rows: Rows) -> str:
    """A markdown table of `rows` (the first is the header)."""
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.insert(1, "|" + "|".join(" --- " for _ in rows[0]) + "|")
    return "\n".join(lines) + "\n"


def aligned(rows: Rows) -> list[str]:
    """`rows` as lines of left-aligned columns, for the terminal."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def cross_validation_table(fit: dict[str, object]) -> str:
    """The leave-future-out checks as markdown: per held-out budget, actual and each law's `pred (err)`.

    `*` marks a prediction whose interval missed the actual loss.
    """
    return markdown(cross_validation_rows(fit))


def stability_table(fit: dict[str, object]) -> str:
    """The prediction at the fit's target from every training-set size, per law, as markdown."""
    return markdown(stability_rows(fit))
