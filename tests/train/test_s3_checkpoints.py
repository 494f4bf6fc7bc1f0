"""8 fake CPU devices, a run on an s3:// prefix (a local moto server): its checkpoints reach the bucket as it trains.

After a SIGKILL it resumes from the bucket on another mesh (2 × 4 → 8 × 1), matching an uninterrupted run.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.executor.s3_server import moto_s3
from tests.processes import finish
from tests.train.test_sharding import _config as sharding_config
from tests.train.test_sharding import _losses
from tootsie.configfile import dump_config
from tootsie.eval.training import run_training
from tootsie.train.config import CheckpointConfig
from tootsie.train.schedule import WSDConfig

s3fs = pytest.importorskip("s3fs")

HARNESS = Path(__file__).with_name("s3_runs.py")
STEPS, EVERY, HOLD = 12, 3, 9
"""Steps of the run, its checkpoint period, and the step after which the first attempt waits to be killed."""


def _committed(fs: "s3fs.S3FileSystem", prefix: str) -> dict[int, str]:
    """{step: checkpoint directory} of every committed checkpoint (one holding state.json) under `prefix`."""
    found = fs.glob(f"{prefix}/**/checkpoints/step-*/state.json")
    return {int(path.split("/")[-2].removeprefix("step-")): path.rsplit("/", 1)[0] for path in found}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_checkpoints_reach_the_bucket_during_the_run_and_a_killed_run_resumes_on_another_mesh(
    tmp_path, make_cache
) -> None:
    config = replace(
        sharding_config(make_cache),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=2, decay_steps=4, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=EVERY, every_minutes=None),
    )
    (tmp_path / "train.yaml").write_text(dump_config(config))
    release = tmp_path / "release"
    with moto_s3() as s3_env:
        fs = s3fs.S3FileSystem(
            endpoint_url=s3_env["AWS_ENDPOINT_URL"],
            key=s3_env["AWS_ACCESS_KEY_ID"],
            secret=s3_env["AWS_SECRET_ACCESS_KEY"],
            token=s3_env["AWS_SESSION_TOKEN"],
            use_listings_cache=False,  # the test lists the bucket while another process writes it
            skip_instance_cache=True,
        )
        bucket = f"tootsie-{uuid.uuid4().hex[:12]}"
        fs.mkdir(bucket)
        env = {
            **os.environ,
            **s3_env,
            "TOOTSIE_CACHE_DIR": str(tmp_path / "cache"),
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8".strip(),
        }
        command = [sys.executable, str(HARNESS), str(tmp_path / "train.yaml"), f"s3://{bucket}/runs"]
        with (tmp_path / "held.log").open("w") as log:
            held = subprocess.Popen([*command, "2", "4", str(HOLD), str(release)], env=env, stdout=log, stderr=log)
        run_training(config, str(tmp_path / "one"))  # one device, while the 8-device run trains

        deadline = time.monotonic() + 180
        while not (Path(f"{release}.held").exists() and {EVERY, 2 * EVERY} <= set(_committed(fs, bucket))):
            assert held.poll() is None, (tmp_path / "held.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"no checkpoints in the bucket: {fs.find(bucket)[:20]}"
            time.sleep(0.1)
        assert held.poll() is None  # the run is alive (after step HOLD) and its checkpoints are in the bucket
        assert sorted(_committed(fs, bucket)) == [EVERY, 2 * EVERY]
        held.send_signal(signal.SIGKILL)
        finish(held, timeout=60)

        resumed = subprocess.run([*command, "8", "1"], env=env, capture_output=True, text=True, timeout=240)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        checkpoints = _committed(fs, bucket)
        assert sorted(checkpoints) == [EVERY, 2 * EVERY, 3 * EVERY, STEPS]
        out = checkpoints[STEPS].rsplit("/checkpoints/", 1)[0]
        records = [json.loads(line) for line in fs.cat(f"{out}/metrics.jsonl").decode().splitlines()]

    assert [r["step"] for r in records] == list(range(2 * EVERY, STEPS))  # resumed from step 6, in the bucket
    one = _losses(tmp_path / "one")
    assert len(one) == STEPS and one[-1] < one[0]
    np.testing.assert_allclose([r["loss"] for r in records], one[2 * EVERY :], rtol=1e-5)  # test_sharding's tolerance
