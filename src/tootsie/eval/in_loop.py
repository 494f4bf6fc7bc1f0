"""In-loop evaluation: held-out bits-per-byte while training, for the raw and the EMA weights.

The trainer knows no evaluation; it calls step hooks. `train_with_eval` is the
training entry point that turns `TrainConfig.eval` into a hook, so every
`eval.every_steps` steps (and after the last) the step's metrics record gains
`eval/bpb/<domain>`, `eval/bpb/macro_avg`, `eval/bpb/micro_avg` and the same
keys with an `_ema` suffix — the pairs `tootsie monitor spikes` reads as the
EMA gap.
"""

import equinox as eqx

from tootsie.datakit.tokenizer import load_tokenizer, token_byte_lengths
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.train.config import TrainConfig
from tootsie.train.trainer import StepHook, TrainState, train


def bpb_hook(config: TrainConfig) -> StepHook:
    """A step hook that scores `config.eval.heldout` every `config.eval.every_steps` steps and at the end."""
    evaluation = config.eval
    byte_lengths = token_byte_lengths(load_tokenizer(evaluation.tokenizer))

    def hook(state: TrainState) -> dict[str, float]:
        if state.step % evaluation.every_steps and state.step != config.num_steps:
            return {}
        weights = {"": state.model}
        if state.ema is not None:
            weights["_ema"] = eqx.combine(state.ema, eqx.filter(state.model, eqx.is_array, inverse=True))
        values = {}
        for suffix, model in weights.items():
            results = {name: domain_bpb(model, cache, byte_lengths, config.data.seq_len, max_sequences=evaluation.max_sequences) for name, cache in sorted(evaluation.heldout.items())}
            values |= {f"eval/bpb/{name}{suffix}": value for name, value in summarize(results).items()}
        return values

    return hook


def train_with_eval(config: TrainConfig, output_path: str) -> TrainState:
    """`train`, plus the in-loop held-out evaluation that `config.eval` asks for (none when it is None)."""
    return train(config, output_path, hooks=[bpb_hook(config)] if config.eval is not None else [])
