"""Paloma sources as in-loop domains: a training config names them, the callback logs Paloma's figures per source."""

import json
import math

import equinox as eqx
import jax
import pytest

from tests.eval.paloma_fixtures import train_fixture_tokenizer, write_mirror
from tests.eval.tiny_checkpoint import TINY_MODEL, tokenizer_and_cache
from tootsie.configfile import from_plain, to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.eval.in_loop import PalomaBPB, evaluation_callbacks
from tootsie.eval.paloma import evaluate_source, prepare_mirror
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaModel
from tootsie.train.config import InLoopEvalConfig, PalomaDomains, TrainConfig
from tootsie.train.state import TrainState

SEQ_LEN = 16


def _config(tokenizer: str, paloma: PalomaDomains, cache: str = "unused-cache") -> TrainConfig:
    return TrainConfig(
        model=TINY_MODEL,
        data=MixtureConfig(
            caches={"c4": cache},
            stages=(MixtureStage(0, {"c4": 1.0}),),
            seq_len=SEQ_LEN,
            batch_schedule=BatchSchedule.constant(2),
        ),
        num_steps=2,
        eval=InLoopEvalConfig(heldout={}, tokenizer=tokenizer, paloma=paloma),
    )


def test_paloma_sources_are_in_loop_domains_for_raw_and_ema_weights(tmp_path) -> None:
    mirror, tokenizer = write_mirror(tmp_path), train_fixture_tokenizer(tmp_path)
    paloma = PalomaDomains(mirror=str(mirror), subsets=("c4_100_domains", "c4_en"), max_documents=1)
    config = _config(tokenizer, paloma)
    assert from_plain(TrainConfig, to_plain(config), "config") == config  # a config file can say it
    (callback,) = evaluation_callbacks(config, str(tmp_path / "run"))
    assert isinstance(callback, PalomaBPB)
    model = LlamaModel(TINY_MODEL, key=jax.random.PRNGKey(0))
    ema = eqx.filter(LlamaModel(TINY_MODEL, key=jax.random.PRNGKey(1)), eqx.is_array)
    scores = callback.scores(TrainState(model=model, opt_state=None, ema=ema, step=2))
    assert sorted(scores) == sorted(
        f"eval/paloma/{s}/{k}{suffix}"
        for s in ("c4_100_domains", "c4_en")
        for k in ("bpb", "bpb_micro", "ppl_token")
        for suffix in ("", "_ema")
    )
    prepared = prepare_mirror(mirror, tokenizer, SEQ_LEN, sources=["c4_100_domains"], max_documents=1)
    expected = evaluate_source(model, prepared["c4_100_domains"])
    assert prepared["c4_100_domains"].documents.tolist() == [1, 1]  # max_documents is per subdomain
    assert math.isclose(scores["eval/paloma/c4_100_domains/bpb"], expected["macro_bpb"], rel_tol=1e-6)
    assert math.isclose(scores["eval/paloma/c4_100_domains/bpb_micro"], expected["micro_bpb"], rel_tol=1e-6)
    assert scores["eval/paloma/c4_en/bpb"] != scores["eval/paloma/c4_en/bpb_ema"]


def test_a_bad_paloma_config_is_refused_before_training(tmp_path) -> None:
    with pytest.raises(ValueError, match="subsets is empty"):
        PalomaDomains(mirror="m", subsets=())
    with pytest.raises(ValueError, match="split must be 'val' or 'test', got 'train'"):
        PalomaDomains(mirror="m", subsets=("c4_en",), split="train")
    tokenizer = train_fixture_tokenizer(tmp_path)
    config = _config(tokenizer, PalomaDomains(mirror=str(tmp_path / "missing"), subsets=("c4_en",)))
    with pytest.raises(TootsieError, match=r"Paloma mirror .*missing not found"):
        evaluation_callbacks(config, str(tmp_path / "run"))


def test_a_training_run_logs_the_paloma_domains(tmp_path) -> None:
    tokenizer, cache = tokenizer_and_cache(tmp_path)
    paloma = PalomaDomains(mirror=str(write_mirror(tmp_path)), subsets=("dolma_100_subreddits",), max_documents=1)
    run_training(_config(tokenizer, paloma, cache), str(tmp_path / "run"))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in records if "eval/paloma/dolma_100_subreddits/bpb" in r]
    assert [r["step"] for r in logged] == [1]  # the last of 2 steps (every_steps is 100)
    assert logged[0]["eval/paloma/dolma_100_subreddits/bpb_ema"] > 0
