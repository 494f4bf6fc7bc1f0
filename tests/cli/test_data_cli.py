"""`tootsie data inspect` and `throughput` on a cache and a mixture config file."""

import json

from tootsie.cli.main import main
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_inspect_cache_and_mixture_and_throughput(tmp_path, make_cache, capsys) -> None:
    a = make_cache("a", [[1, 2, 3, 4, 5, 6, 7, 8, 9]] * 20)
    b = make_cache("b", [[10, 11, 12]] * 40)
    assert main(["data", "inspect", a, "--json"]) == 0
    cache = _last_json(capsys)
    assert (
        cache["kind"] == "cache"
        and cache["docs"] == 20
        and cache["tokens"] == 180
        and cache["token_id_range_first_1M"] == [1, 9]
    )

    config = MixtureConfig(
        caches={"a": a, "b": b},
        stages=(MixtureStage(0, {"a": 0.75, "b": 0.25}), MixtureStage(10, {"b": 1.0})),
        seq_len=4,
        batch_schedule=BatchSchedule.constant(8),
        block_size=8,
    )
    (tmp_path / "mix.yaml").write_text(dump_config(config))
    assert main(["data", "inspect", str(tmp_path / "mix.yaml"), "--steps", "0:20", "--json"]) == 0
    mixture = _last_json(capsys)
    assert mixture["batch_components"] == {"a": 6, "b": 2}
    assert mixture["mixture"]["a"] == {"realized": 0.375, "target": 0.375}

    assert main(["data", "throughput", str(tmp_path / "mix.yaml"), "--steps", "5", "--json"]) == 0
    assert _last_json(capsys)["tokens_per_s"] > 0
    assert main(["data", "inspect", str(tmp_path / "mix.yaml"), "--steps", "5:1"]) == 2
    assert "expected A:B" in capsys.readouterr().err
