"""The shuffle report flags an LCG with phases, passes Feistel and true shuffles, and keeps its JSON contract."""

import argparse
import json

import numpy as np
import pytest

from tootsie.cli import data_cmd
from tootsie.data.shuffle_report import (
    ShuffleReportConfig,
    autocorrelation,
    autocorrelations,
    batch_means,
    shuffle_report,
    verdict,
)
from tootsie.errors import TootsieError

N, B = 1_000_003, 1024  # the case: 976 steps
BAD_SEED = 1159  # draws a = 399,992 ≈ 2N/5 (found by scanning seeds 0..1199)
BAD_MULTIPLIER = 666_678  # ≈ 2N/3, drawn by seed 674 in the same scan


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tootsie")
    data_cmd.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_unlucky_lcg_seed_is_a_phase_risk() -> None:
    report = shuffle_report(ShuffleReportConfig(perm="linear", length=N, batch_size=B, seed=BAD_SEED))
    assert report["multiplier"] == 399_992 and report["steps"] == 976
    assert report["autocorrelation"]["lag1"] > 0.8 and report["verdict"] == "phase-risk"
    assert report["batch_mean_std"] > 3 * report["reference_batch_mean_std"]


def test_forced_multiplier_reproduces_a_known_bad_run() -> None:
    report = shuffle_report(
        ShuffleReportConfig(perm="linear", length=N, batch_size=B, seed=0, options={"multiplier": BAD_MULTIPLIER})
    )
    assert report["multiplier"] == BAD_MULTIPLIER
    assert report["autocorrelation"]["lag1"] > 0.8 and report["verdict"] == "phase-risk"


@pytest.mark.parametrize("seed", [0, BAD_SEED])
def test_feistel_on_the_same_corpus_is_ok(seed: int) -> None:
    report = shuffle_report(ShuffleReportConfig(perm="feistel", length=N, batch_size=B, seed=seed))
    assert report["verdict"] == "ok"
    assert all(abs(value) < report["margin"] for value in report["autocorrelation"].values())


@pytest.mark.parametrize("seed", range(4))
def test_a_true_random_shuffle_is_ok(seed: int) -> None:
    config = ShuffleReportConfig(perm="feistel", length=N, batch_size=B, seed=seed)
    rng = np.random.default_rng(seed + 100)
    shuffled, reference = (batch_means(rng.choice(N, size=config.steps * B, replace=False), config) for _ in range(2))
    assert verdict(autocorrelations(shuffled), autocorrelations(reference), config.steps) == "ok"


def test_autocorrelation_of_known_series() -> None:
    alternating = np.tile([1.0, -1.0], 50)
    assert autocorrelation(alternating, 1) == pytest.approx(-0.99)
    assert autocorrelation(alternating, 100) is None and autocorrelation(np.ones(5), 1) == 0.0
    assert verdict({"lag1": 0.5, "lag10": None}, {"lag1": 0.0, "lag10": None}, steps=100) == "phase-risk"
    assert verdict({"lag1": 0.25}, {"lag1": 0.0}, steps=100) == "ok"  # inside 3/sqrt(100)


def test_cli_json_contract(capsys) -> None:
    argv = [
        "data",
        "shuffle-report",
        "--perm",
        "linear",
        "--length",
        "200003",
        "--batch-size",
        "256",
        "--seed",
        "1",
        "--multiplier",
        "3",
        "--json",
    ]
    args = _parse(argv)
    assert args.handler(args) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {
        "perm",
        "length",
        "batch_size",
        "seed",
        "multiplier",
        "steps",
        "autocorrelation",
        "reference_autocorrelation",
        "verdict",
    } <= set(report)
    assert set(report["autocorrelation"]) == set(report["reference_autocorrelation"]) == {"lag1", "lag10", "lag100"}
    assert (
        report["perm"],
        report["length"],
        report["batch_size"],
        report["seed"],
        report["multiplier"],
        report["steps"],
    ) == ("linear", 200_003, 256, 1, 3, 781)
    assert report["verdict"] == "phase-risk"  # a = 3: each batch is three nearby stretches of the ordered corpus


def test_cli_human_output_and_errors(capsys) -> None:
    # Era windows of 1000 items hold 10 consecutive batches of 100 each, and items never leave their window: batch
    # means follow the corpus walk window by window (lag-1 near 0.95), far above a true shuffle's 3/sqrt(200) margin.
    args = _parse(
        [
            "data",
            "shuffle-report",
            "--perm",
            "era",
            "--length",
            "50000",
            "--batch-size",
            "100",
            "--era-length",
            "1000",
            "--max-steps",
            "200",
        ]
    )
    assert args.handler(args) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("phase-risk: era over 200 steps (lag1 +0.9")
    args = _parse(
        [
            "data",
            "shuffle-report",
            "--perm",
            "feistel",
            "--length",
            "50000",
            "--batch-size",
            "100",
            "--max-steps",
            "200",
        ]
    )
    assert args.handler(args) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("ok: feistel over 200 steps")
    with pytest.raises(TootsieError, match=r"\['multiplier'\] do not apply to permutation 'feistel'"):
        args = _parse(
            [
                "data",
                "shuffle-report",
                "--perm",
                "feistel",
                "--length",
                "1000",
                "--batch-size",
                "10",
                "--multiplier",
                "3",
            ]
        )
        args.handler(args)
    with pytest.raises(TootsieError, match="multiplier=4 must be positive and coprime with length=1000"):
        args = _parse(
            [
                "data",
                "shuffle-report",
                "--perm",
                "linear",
                "--length",
                "1000",
                "--batch-size",
                "10",
                "--multiplier",
                "4",
            ]
        )
        args.handler(args)
    with pytest.raises(TootsieError, match="holds 1 batches of 600; need >= 3"):
        args = _parse(["data", "shuffle-report", "--perm", "linear", "--length", "1000", "--batch-size", "600"])
        args.handler(args)
