"""Case study: an LCG shuffle of an ordered corpus makes the train loss phase-shift while eval stays smooth.

The 32B Bison cooldown's train loss "phase-shifted while validation remained
stable" (32B retrospective, Shuffling): its linear permutation `p(x) = (a*x + b)
mod N` had walked a corpus that was not pre-shuffled with a small stride, so
consecutive batches came from neighbouring, similar stretches of it. Mantis's
Feistel permutation fixed it. At toy scale:

1. `concatenate_caches` joins the code, web and math train caches in that
   order: one component whose stored order is by kind, as a crawl stored by
   source would be.
2. `find_poor_lcg_seed` picks the first mixture seed whose LCG draw for that
   component is poor in a chosen way. A stride `a = p*N/q + d` (p coprime with
   q) sends consecutive draws to q stretches of the corpus N/q apart, each
   moving by only `d` per draw: every block of draws reads q narrow bands, and
   the bands creep along the corpus. The search wants `q = bands` and the
   bands to sweep their spacing `min_sweeps`..`max_sweeps` times over the run
   (`steps * batch * |d| * q / N`). `bands=1` is the retrospective's "very
   small step size" (a batch reads one stretch: single-kind batches); the
   shuffle report's worked example has 5 bands. The 32B run met such a draw by
   bad luck; here the search makes the effect reliable, and both arms use the
   seed.
3. Two runs differ only in `MixtureConfig.permutation` (linear, feistel); both
   evaluate held-out bits-per-byte of the three kinds every few steps.
4. `analyze_shuffle` measures, per arm: the batch composition (share of each
   kind per step, from the data stream itself; its spread after a
   `smooth_steps` mean shows slow drift, not batch noise), and how much of the smoothed
   train loss the held-out loss explains (R² of a linear fit of train loss on
   eval macro BPB at the eval steps, and the residual RMS in nats/token). A
   phase shift is train-loss movement that eval does not share: a low R² and a
   large residual.

Example (docs/case-studies.md has the measured run): on 400k tokens of web
then 400k of math, seed 3086 draws a = 8333 ≈ 2N/3 for N = 12,502 sequences;
the linear arm's 10-step mean math share swings between about 1/3 and 2/3
while the Feistel arm's stays near 1/2, and eval BPB explains R² ≈ 0.2 of the
linear arm's smoothed train loss against ≈ 0.97 of the Feistel arm's.
"""

from dataclasses import dataclass, replace
from math import gcd
from pathlib import Path

import numpy as np
from jaxtyping import Float, Int64, Integer
from matplotlib.figure import Figure

from tootsie.data.mixture import MixtureDataset
from tootsie.datakit.token_cache import open_token_cache
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.executor.step import direct_outputs
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.recipes.cases.common import CASE_BATCH, metric_series, mixture, trailing_mean, write_results
from tootsie.recipes.tiny.scale import TINY_SEQ_LEN
from tootsie.train.config import TrainConfig
from tootsie.train.loading import CHECKPOINTS

ORDERED = "ordered"
"""Name of the single component of the ordered corpus."""
SEED_FILE = "seed.json"


@dataclass(frozen=True)
class SeedSearchConfig:
    """The ordered corpus and the run whose draws must sweep it with a small LCG stride."""

    cache: str
    """The ordered corpus (one token cache)."""
    steps: int
    """Training steps of the arms."""
    min_sweeps: float = 1.0
    """Fewest straight-line sweeps of the corpus over the run (fewer: the run never leaves one kind)."""
    max_sweeps: float = 3.0
    """Most sweeps (more: the bands move too fast for neighbouring batches to look alike)."""
    bands: int = 3
    """Stretches of the corpus each block of draws reads (1: a small stride; 3: each batch mixes 3 bands N/3 apart)."""
    max_seed: int = 200_000
    """Give up after trying seeds 0 .. max_seed - 1."""

    def __post_init__(self) -> None:
        if not 0 < self.min_sweeps < self.max_sweeps or self.steps <= 0 or self.bands < 1:
            raise ValueError(
                "need steps > 0, bands >= 1 and 0 < min_sweeps < max_sweeps, got "
                f"{self.steps=}, {self.bands=}, {self.min_sweeps=}, {self.max_sweeps=}"
            )


def lcg_draw(cache: str, seed: int) -> tuple[int, int, int]:
    """`(a, b, N)` of the linear permutation the mixture draws for the ordered component with `seed`.

    Read off `batch` positions.
    """
    dataset = MixtureDataset(mixture({ORDERED: cache}, {ORDERED: 1.0}, seed=seed, permutation="linear"))
    block = np.arange(dataset.config.block_size)
    _, draws = dataset.draws(block)
    _, local = dataset.sequence_sources(block)
    first, second = local[np.argsort(draws)[:2]]
    length = dataset.sources[ORDERED].num_sequences
    return int((second - first) % length), int(first), length


def band_drift(a: int, length: int, bands: int) -> float | None:
    """`d` in `a = p*N/bands + d` for the nearest p (mod N).

    None when that p shares a factor with `bands` (fewer bands).
    """
    p = round(a * bands / length)
    if gcd(p, bands) != 1:
        return None
    return a - p * length / bands


def find_poor_lcg_seed(config: SeedSearchConfig, output_path: str) -> dict[str, object]:
    """Write `seed.json`: the first seed whose LCG stride reads `bands` bands.

    The bands sweep `min_sweeps`..`max_sweeps` times over the run.
    """
    draws = config.steps * CASE_BATCH
    for seed in range(config.max_seed):
        a, b, length = lcg_draw(config.cache, seed)
        drift = band_drift(a, length, config.bands)
        sweeps = None if drift is None else draws * abs(drift) * config.bands / length
        if sweeps is not None and config.min_sweeps <= sweeps <= config.max_sweeps:
            found = {
                "seed": seed,
                "multiplier": a,
                "offset": b,
                "sequences": length,
                "bands": config.bands,
                "drift": drift,
                "sweeps": sweeps,
                "seeds_tried": seed + 1,
            }
            write_json_atomic(Path(output_path) / SEED_FILE, found)
            return found
    raise TootsieError(
        f"no seed below {config.max_seed} gives an LCG stride with {config.bands} band(s) sweeping "
        f"{config.cache} {config.min_sweeps}-{config.max_sweeps} times; raise max_seed or widen the sweep range"
    )


@dataclass(frozen=True)
class SeededTrainConfig:
    """A training run whose data seed is read from a seed search's output."""

    train: TrainConfig
    """The run; its `data.seed` is replaced by the found seed."""
    seed_file: str
    """The search's seed.json."""


@direct_outputs(CHECKPOINTS)
def train_with_found_seed(config: SeededTrainConfig, output_path: str, *, final_output: str | None = None) -> None:
    """Train `config.train` with the data seed from `config.seed_file` (with its in-loop evaluation)."""
    seed = int(read_json(Path(config.seed_file))["seed"])
    run_training(
        replace(config.train, data=replace(config.train.data, seed=seed)), output_path, final_output=final_output
    )


def region_of_sequences(cache: str, local: Integer[np.ndarray, " n"]) -> Int64[np.ndarray, " n"]:
    """Which input cache of a concatenation (its ledger's `doc_starts`) each packed sequence starts in."""
    opened = open_token_cache(cache)
    token_starts = opened.offsets[np.asarray(opened.ledger["doc_starts"][1:-1], dtype=np.int64)]
    return np.searchsorted(token_starts, local * TINY_SEQ_LEN, side="right")


def batch_composition(
    cache: str, seed: int, permutation: str, steps: int, regions: int
) -> Float[np.ndarray, "steps regions"]:
    """`[steps, regions]`: the share of each region in every step's batch under `permutation`."""
    dataset = MixtureDataset(mixture({ORDERED: cache}, {ORDERED: 1.0}, seed=seed, permutation=permutation))
    _, local = dataset.sequence_sources(np.arange(steps * CASE_BATCH))
    which = region_of_sequences(cache, local).reshape(steps, CASE_BATCH)
    return np.stack([(which == r).mean(axis=1) for r in range(regions)], axis=1)


def explained_by_eval(
    train_steps: Integer[np.ndarray, " n"],
    train_loss: Float[np.ndarray, " n"],
    eval_steps: Integer[np.ndarray, " m"],
    eval_bpb: Float[np.ndarray, " m"],
    window: int,
    skip: int,
) -> dict[str, float]:
    """R² and residual RMS (nats/token) of the `window`-step mean train loss fitted linearly on eval BPB.

    The fit uses the eval steps >= `skip`.
    """
    smoothed = trailing_mean(train_loss, window)
    keep = eval_steps >= skip
    at = np.searchsorted(
        train_steps, eval_steps[keep]
    )  # the eval logged at a step saw the model after that step's update
    y, x = smoothed[at], eval_bpb[keep]
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = float(((y - y.mean()) ** 2).sum())
    return {
        "r2": 1.0 - float((residual**2).sum()) / total if total > 0 else 1.0,
        "residual_rms": float(np.sqrt((residual**2).mean())),
        "residual_max_abs": float(np.abs(residual).max()),
        "points": int(keep.sum()),
    }


@dataclass(frozen=True)
class ShuffleAnalysisConfig:
    """The two arms, the ordered corpus and the seed they used."""

    runs: dict[str, str]
    """Permutation name ("linear", "feistel") → its training run."""
    cache: str
    """The ordered corpus."""
    seed_file: str
    """The seed search's seed.json."""
    regions: tuple[str, ...]
    """Names of the concatenated caches, in stored order."""
    steps: int
    """Training steps of the arms."""
    smooth_steps: int = 10
    """Train loss is averaged over this many steps before it is compared with eval."""
    skip_steps: int = 50
    """Steps left out of the statistics (the fast initial descent)."""


def analyze_shuffle(config: ShuffleAnalysisConfig, output_path: str) -> dict[str, object]:
    """Batch composition and train-vs-eval statistics of both arms; `figure.png` and `results.json`."""
    found = read_json(Path(config.seed_file))
    figure = Figure(figsize=(11, 8.5))
    axes = figure.subplots(3, 1, sharex=True)
    results: dict[str, object] = {"seed": found, "regions": list(config.regions), "arms": {}}
    colors = {"linear": "tab:red", "feistel": "tab:blue"}
    for permutation, run in config.runs.items():
        shares = batch_composition(config.cache, int(found["seed"]), permutation, config.steps, len(config.regions))
        steps, loss = metric_series(run, "loss")
        eval_steps, eval_bpb = metric_series(run, "eval/bpb/macro_avg")
        fit = explained_by_eval(steps, loss, eval_steps, eval_bpb, config.smooth_steps, config.skip_steps)
        smoothed = np.stack(
            [trailing_mean(shares[:, r], config.smooth_steps) for r in range(len(config.regions))], axis=1
        )[config.smooth_steps - 1 :]
        results["arms"][permutation] = {
            "dominant_share_mean": float(shares.max(axis=1).mean()),
            "share_std_smoothed": {name: float(smoothed[:, r].std()) for r, name in enumerate(config.regions)},
            "train_loss_vs_eval": fit,
            "final_train_loss_mean10": float(loss[-10:].mean()),
            "final_eval_macro_bpb": float(eval_bpb[-1]),
        }
        style = "-" if permutation == "linear" else ":"
        for r, name in enumerate(config.regions):
            axes[0].plot(
                np.arange(config.steps),
                trailing_mean(shares[:, r], config.smooth_steps),
                style,
                color=f"C{r}",
                linewidth=1.2,
                label=f"{name} ({permutation})",
            )
        axes[1].plot(
            steps,
            trailing_mean(loss, config.smooth_steps),
            color=colors.get(permutation),
            label=f"train loss, {config.smooth_steps}-step mean ({permutation})",
        )
        twin = axes[2]
        twin.plot(
            eval_steps,
            eval_bpb,
            "o-",
            markersize=3,
            color=colors.get(permutation),
            label=f"held-out macro BPB ({permutation}); R² train~eval {fit['r2']:.2f}",
        )
    axes[0].set_ylabel(f"share of batch\n({config.smooth_steps}-step mean)")
    axes[0].set_title(
        f"Batch composition on the ordered corpus ({' → '.join(config.regions)}); "
        f"LCG a={found['multiplier']}, N={found['sequences']}: "
        f"{found['bands']} band(s) drifting {found['drift']:+.2f} per draw (seed {found['seed']})",
        fontsize=10,
    )
    axes[1].set_ylabel("train loss (nats/token)")
    axes[2].set_ylabel("eval BPB (macro)")
    axes[2].set_xlabel("step")
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, ncol=3 if axis is axes[0] else 1)
    figure.tight_layout()
    return write_results(output_path, results, figure)
