"""Synthetic isoflop sweeps drawn from Chinchilla's parametric law, whose compute-optimal frontier is known exactly.

With `L(N, D) = E + A/N^a + B/D^b` and `C = 6·N·D`, minimizing over N at fixed C
gives power laws exactly (Hoffmann et al. 2022, appendix D.2):

    N_opt = G · (C/6)^(b/(a+b)),   G = (aA / bB)^(1/(a+b))
    L_opt = E + A·(1 + a/b)·N_opt^-a = E + K · C^-(ab/(a+b))

so a fit of the sweep's minima must recover E, K and ab/(a+b).
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class ChinchillaLaw:
    """Chinchilla's fitted constants (Hoffmann et al. 2022, eq. 10) by default."""

    E: float = 1.69
    A: float = 406.4
    B: float = 410.7
    a: float = 0.34
    b: float = 0.28

    def loss(self, params: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        return self.E + self.A / params**self.a + self.B / tokens**self.b

    @property
    def alpha(self) -> float:
        """Exponent of L_opt(C) - E."""
        return self.a * self.b / (self.a + self.b)

    @property
    def params_exponent(self) -> float:
        return self.b / (self.a + self.b)

    def params_opt(self, compute: float) -> float:
        return (self.a * self.A / (self.b * self.B)) ** (1 / (self.a + self.b)) * (compute / 6) ** self.params_exponent

    def loss_opt(self, compute: float) -> float:
        params = self.params_opt(compute)
        return self.loss(np.array(params), np.array(compute / (6 * params)))

    @property
    def coefficient(self) -> float:
        """K in L_opt = E + K·C^-alpha."""
        return float((self.loss_opt(1e20) - self.E) * 1e20**self.alpha)


def sweep_records(
    law: ChinchillaLaw, budgets: list[float], sizes_per_budget: int, spread: float, noise: float, seed: int
) -> list[dict[str, float]]:
    """Runs at `sizes_per_budget` sizes per budget, log-spaced over N_opt·[1/spread, spread], loss + N(0, noise²)."""
    rng = np.random.default_rng(seed)
    records = []
    for compute in budgets:
        centre = law.params_opt(compute) * np.exp(rng.uniform(-0.2, 0.2))
        for params in centre * np.geomspace(1 / spread, spread, sizes_per_budget):
            tokens = compute / (6 * params)
            loss = float(law.loss(np.array(params), np.array(tokens))) + noise * rng.standard_normal()
            records.append({"compute": compute, "params": float(params), "tokens": float(tokens), "loss": loss})
    return records


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
