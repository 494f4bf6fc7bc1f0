"""`tootsie plan memory`: the --json contract, the table, and one-line errors."""

import json

import pytest

from tootsie.cli.main import main

CONTRACT = {"per_device", "device_bytes", "fits", "notes"}
PARTS = {"params", "optimizer", "gradients", "activations", "temporaries", "total"}


def test_json_has_the_contract_keys_and_the_8b_state_bytes(capsys) -> None:
    code = main(
        ["plan", "memory", "--model", "8b", "--seq-len", "4096", "--batch-size", "256"]
        + ["--mesh", "fsdp=8", "--device-kind", "h100", "--no-compile", "--json"]
    )
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and CONTRACT <= set(result) and set(result["per_device"]) == PARTS
    per_device = result["per_device"]
    assert per_device["total"] == sum(per_device[part] for part in PARTS - {"total"})
    # tests/train/test_memory_plan.py derives it: 4_016_062_464 bytes of fp32 weights per device (an eighth of
    # marin-8b's 8_030_261_248 but the replicated RMSNorm scales), held 4 times (params, Adam's mu and nu, the
    # EMA), and Adam's and the LR schedule's int32 step counts
    assert per_device["params"] + per_device["optimizer"] == 4 * 4_016_062_464 + 2 * 4
    assert result["device_bytes"] == 80 * 2**30 and result["fits"] is False
    assert result["mesh"] == {"data": 1, "expert": 1, "fsdp": 8, "tensor": 1}


def test_table_is_in_gib(capsys) -> None:
    code = main(
        ["plan", "memory", "--model", "tiny", "--seq-len", "128", "--batch-size", "8", "--devices", "1", "--no-compile"]
    )
    out = capsys.readouterr().out
    assert code == 0 and "GiB" in out and "total" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--mesh", "fsdp:8"], "--mesh"), (["--devices", "1", "--device-kind", "tpu9"], "unknown device kind")],
)
def test_bad_flags_are_one_line_errors(capsys, flags: list[str], message: str) -> None:
    code = main(["plan", "memory", "--model", "tiny", "--seq-len", "128", "--batch-size", "8", "--no-compile", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err
