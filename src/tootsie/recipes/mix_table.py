"""Mixture tables as the seeds print them: component, the seed's display name, share in percent.

A table keeps the seed's rounded percentages exactly (so a test can compare it
with the seed text) and says where it came from. `weights()` normalizes them
to sum to 1, which is what a `MixtureStage` takes; the raw percentages sum to
the table's printed total up to rounding (e.g. 100.02 % for the Bison table).
`mix_stage(start_step, table)` is the data layer's `MixtureStage` with the
table's weights, labeled with its name and source for plans.

A table holds proportions only. The Starling table also prints an
"oversampling" factor per dataset, but with the proportions fixed it is not a
second setting: the epochs a run reads of a dataset follow from its
proportion, the tokens trained and the dataset's size (a component that runs
out starts a new, reshuffled epoch), and the release manifest reports them
(`epochs`). The seed's column is kept, as documentation, in
`marin.tables_8b.STARLING_OVERSAMPLING`.

Two mixes in the seeds are described as changes to a table rather than printed:
Spoonbill adds Tulu v3 and FLAN to the Jellyfish mix, and Mantis adds StackV2
Python at ~174k, renormalizing only the high-quality part. `with_added` builds
such a derived table: the new rows get their shares and the rows named in
`rescale` shrink proportionally so the total is unchanged.

Example: `with_added(t, "x", "...", (MixRow("new", "New", 1.0),), rescale=("a", "b"))`
on a table a=60, b=40 gives a=59.4, b=39.6, new=1.0.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from tootsie.data.mixture import MixtureStage


@dataclass(frozen=True)
class MixRow:
    """One row of a seed mixture table."""

    component: str
    """Component name: the key of the token cache the user supplies (the 32B seed's own names where it has them)."""
    display: str
    """The dataset's name exactly as the seed table prints it."""
    percent: float
    """Share in percent, as printed (rounded)."""

    def __post_init__(self) -> None:
        if not self.component:
            raise ValueError(f"component must be a non-empty name, got {self.component!r} for {self.display!r}")
        if not 0 < self.percent <= 100:
            raise ValueError(f"percent must be in (0, 100], got {self.percent} for {self.component!r}")


@dataclass(frozen=True)
class MixTable:
    """A named mixture table with its source."""

    name: str
    """Short name shown in plans, e.g. "bison"."""
    source: str
    """Seed file and section the numbers come from (or how they were derived)."""
    rows: tuple[MixRow, ...]
    """Rows in the seed's order."""

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError(f"mixture table {self.name!r} has no rows")
        names = [row.component for row in self.rows]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"mixture table {self.name!r} lists components {duplicates} more than once")

    @property
    def total_percent(self) -> float:
        """Sum of the printed percentages (100 up to the seed's rounding)."""
        return sum(row.percent for row in self.rows)

    def percents(self) -> dict[str, float]:
        """Component → printed percentage."""
        return {row.component: row.percent for row in self.rows}

    def weights(self) -> dict[str, float]:
        """Component → weight, normalized to sum to 1."""
        total = self.total_percent
        return {row.component: row.percent / total for row in self.rows}


def mix_stage(start_step: int, table: MixTable, transition_steps: int = 0) -> MixtureStage:
    """The stage with `table`'s weights from `start_step` (a global step), reached over `transition_steps`.

    It is named after the table.
    """
    return MixtureStage(start_step, table.weights(), transition_steps, name=table.name, source=table.source)


def rows(*entries: tuple[str, str, float] | tuple[str, float]) -> tuple[MixRow, ...]:
    """MixRows from `(component, display, percent)` or `(name, percent)` tuples (display = name)."""
    made = []
    for entry in entries:
        if len(entry) == 2:
            made.append(MixRow(entry[0], entry[0], entry[1]))
        else:
            made.append(MixRow(*entry))
    return tuple(made)


def with_added(
    table: MixTable, name: str, source: str, added: Iterable[MixRow], rescale: Iterable[str] | None = None
) -> MixTable:
    """`table` plus `added` rows; the rows in `rescale` (all when None) shrink so the total stays the same."""
    added = tuple(added)
    scaled = set(table.percents()) if rescale is None else set(rescale)
    unknown = sorted(scaled - set(table.percents()))
    if unknown:
        raise ValueError(f"rescale names components {unknown} that table {table.name!r} does not have")
    budget = sum(row.percent for row in table.rows if row.component in scaled)
    extra = sum(row.percent for row in added)
    if extra >= budget:
        raise ValueError(
            f"added shares ({extra} %) must be smaller than the rescaled budget ({budget} %) of table {table.name!r}"
        )
    factor = (budget - extra) / budget
    kept = tuple(
        MixRow(row.component, row.display, row.percent * factor) if row.component in scaled else row
        for row in table.rows
    )
    return MixTable(name=name, source=source, rows=kept + added)
