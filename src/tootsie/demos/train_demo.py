"""The `tootsie train` example: a tiny Llama on the demo's train caches, a minute or two on 2 CPU cores.

`train_example(prefix)` builds the demo's token caches under `prefix` through
the executor (a second call skips them) and returns a complete `TrainConfig`:
a 2-layer model, an even code/prose mixture, a WSD schedule over
`EXAMPLE_STEPS` steps and a checkpoint every 10 steps, so a reader can watch
it resume. `tootsie train example-config` prints it.

`train_example(prefix, moe=True)` (`tootsie train example-config --moe`) is
the same run with a mixture of experts: each block's MLP becomes 8 SwiGLU
experts half the dense width, each token routed to 2 of them (so the active
MLP width is the dense example's), under capacity factor 1.25 with a
load-balancing weight of 0.1: at the default 0.01 this run's routing collapsed
(45 % of assignments dropped at step 60, the busiest expert taking 45 % of
them), at 0.1 it stays near even (13 % dropped, 24 %; uniform is 12.5 %).
"""

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.demos.stdlib_demo import SOURCES, DemoSettings, build_data_steps
from tootsie.errors import TootsieError
from tootsie.executor import failure_summary, run_experiment
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig

EXAMPLE_STEPS = 60
"""Steps of the example run: enough to see the loss fall, few enough for a minute or two on 2 CPU cores."""


def train_example(prefix: str, moe: bool = False) -> TrainConfig:
    """A tiny Llama (or with `moe`, an 8-expert k = 2 MoE) on the demo's train caches under `prefix`.

    The caches are built through the executor if missing.
    """
    settings = DemoSettings()
    _, cache_steps = build_data_steps(settings)
    caches = {source: cache_steps[source, "train"] for source in SOURCES}
    report = run_experiment(list(caches.values()), prefix)
    if not report.ok:
        raise TootsieError(f"building the demo corpus failed: {failure_summary(report)}")
    paths = {step.name: step.output_path for step in report.steps}
    model = LlamaConfig(
        vocab_size=settings.vocab_size, hidden_dim=64, intermediate_dim=256, num_layers=2, num_heads=4, num_kv_heads=2
    )
    if moe:
        fields = {field: getattr(model, field) for field in ("vocab_size", "hidden_dim", "num_layers", "num_heads")}
        model = MoeConfig(
            **fields,
            num_kv_heads=model.num_kv_heads,
            intermediate_dim=model.intermediate_dim // 2,
            num_experts=8,
            experts_per_token=2,
            capacity_factor=1.25,
            load_balancing_weight=0.1,
        )
    data = MixtureConfig(
        caches={source: paths[step.name] for source, step in caches.items()},
        stages=(MixtureStage(0, {"code": 0.5, "prose": 0.5}),),
        seq_len=128,
        batch_schedule=BatchSchedule.constant(8),
    )
    schedule = WSDConfig(peak_lr=3e-3, warmup_steps=6, decay_steps=12, total_steps=EXAMPLE_STEPS)
    return TrainConfig(
        model=model,
        data=data,
        num_steps=EXAMPLE_STEPS,
        schedule=schedule,
        checkpoints=CheckpointConfig(every_steps=10, every_minutes=None),
    )
