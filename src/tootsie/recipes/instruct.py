"""An SFT recipe as an experiment: a chat-mixture phase warm-started from another recipe's released step.

Design. An instruct recipe is a `Recipe` whose one root phase fine-tunes on a
mixture of chat sets. `sft_steps` builds it like any recipe (`build.phase_config`)
and changes two things: sequences are packed as whole conversations
(`WholeDocumentsConfig`, so a conversation is never split and the loss mask
from the chat caches applies), and the root warm-starts from the base
recipe's final step (weights only, steps counted from 0, so the SFT schedule
starts fresh). The base is referenced as a step, so the SFT step's hash
follows the base's and a run builds the base first if it is missing.

`InstructExperiment.selected()` gives an experiment file its SCALE, STEPS and
PLAN. At full scale the STEPS are the SFT step (the base recipe's steps come in
as its dependencies); at tiny scale they are the tiny base (the base recipe's
tiny steps, shared with `tootsie run experiments/marin_8b.py --scale tiny`),
local chat stand-ins (`tiny_chat`) tokenized with the base's tokenizer and a
chat template, the SFT step, and two report steps: `<recipe>/report` (the
run's `report.html`) and `<recipe>/assistant-loss` (held-out assistant-token
loss of the base and of the SFT model per kind of conversation).

Example: `EXPERIMENT.plan()["phases"][0]["steps"][0]["warm_start"]` is
`{"from": "marin_8b/starling", "load_optimizer": false, "reset_step": true, ...}`.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from tootsie.data.sequences import WholeDocumentsConfig
from tootsie.datakit.tokenize import ChatTokenizeConfig, tokenize_chat
from tootsie.eval.assistant_loss import AssistantLoss, assistant_loss
from tootsie.executor import Step, StepRef
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig
from tootsie.recipes.build import phase_config
from tootsie.recipes.components import components_from_env, train_phase
from tootsie.recipes.experiment_file import RecipeExperiment
from tootsie.recipes.plan import recipe_plan
from tootsie.recipes.recipe import Recipe
from tootsie.recipes.scale import FULL, Scale
from tootsie.recipes.tiny.chat import COMPONENTS_DIR, HELDOUT_DIR, TinyChatConfig, build_tiny_chat
from tootsie.recipes.tiny.data import tiny_data_steps
from tootsie.recipes.tiny.scale import selected_scale, tiny_recipe_steps
from tootsie.report.run_summary import RunSummaryConfig, summarize_runs
from tootsie.train.config import InLoopEvalConfig, TrainConfig, WarmStartConfig
from tootsie.train.loading import load_model

REPORT_FILE = "assistant_loss.json"


def sft_steps(
    recipe: Recipe,
    scale: Scale,
    components: Mapping[str, str | StepRef],
    base: Step[TrainConfig],
    in_loop_eval: InLoopEvalConfig | None = None,
) -> dict[str, Step[TrainConfig]]:
    """Phase name → SFT training step: whole-conversation packing, the root warm-started from `base`."""
    steps: dict[str, Step[TrainConfig]] = {}
    for phase in recipe.phases:
        parent = None if phase.parent is None else steps[phase.parent]
        config = phase_config(recipe, phase, scale, components, parent, in_loop_eval)
        warm_start = config.warm_start or WarmStartConfig(base.ref(), load_optimizer=False, reset_step=True)
        config = replace(config, data=replace(config.data, packing=WholeDocumentsConfig()), warm_start=warm_start)
        steps[phase.name] = Step(f"{recipe.name}/{phase.name}", train_phase, config, description=phase.note)
    return steps


def sft_plan(
    recipe: Recipe, steps: dict[str, Step[TrainConfig]], scale: Scale, base: Step[TrainConfig]
) -> dict[str, Any]:
    """The recipe plan, with the base step, the packing, and the root phase's warm start from `base`."""
    plan = recipe_plan(recipe, steps, scale)
    for group in plan["phases"]:
        for entry in group["steps"]:
            config = steps[entry["name"]].config
            entry["packing"] = "whole_documents"
            if entry["warm_start"] is None:
                entry["warm_start"] = {
                    "from": base.name,
                    "base_end_step": base.config.num_steps,
                    "load_optimizer": config.warm_start.load_optimizer,
                    "reset_step": config.warm_start.reset_step,
                    "moments_carried": False,
                }
    return {**plan, "base_model": base.name}


@dataclass(frozen=True)
class AssistantLossReportConfig:
    """Which checkpoints to compare on which held-out chat caches."""

    model: LlamaConfig
    """The model both checkpoints hold."""
    checkpoints: dict[str, str]
    """Label ("base", "sft") → training output directory or checkpoint."""
    heldout: dict[str, str]
    """Kind → held-out chat cache (with a loss mask)."""
    seq_len: int
    """Sequence length the conversations are packed to."""


def assistant_loss_report(config: AssistantLossReportConfig, output_path: str) -> dict[str, Any]:
    """Held-out assistant-token loss (nats/token) of each checkpoint per cache and overall; writes REPORT_FILE."""
    report: dict[str, Any] = {"heldout": {name: {} for name in config.heldout}}
    for label, checkpoint in config.checkpoints.items():
        model = load_model(config.model, checkpoint)
        losses = {name: assistant_loss(model, cache, config.seq_len) for name, cache in config.heldout.items()}
        for name, loss in losses.items():
            report["heldout"][name][label] = round(loss.loss, 4)
        total = AssistantLoss(sum(x.nats for x in losses.values()), sum(x.tokens for x in losses.values()))
        report[label] = round(total.loss, 4)
        report["assistant_tokens"] = total.tokens
    write_json_atomic(Path(output_path) / REPORT_FILE, report)
    return report


@dataclass(frozen=True)
class InstructExperiment:
    """An SFT recipe on top of a base recipe's final step: the STEPS and PLAN of its experiment file."""

    recipe: Recipe
    """The SFT phase(s), mixture and schedule."""
    base: RecipeExperiment
    """The base recipe; its `final` phase is the warm start."""
    tiny: Scale
    """The SFT's `--scale tiny` (the base uses its own tiny scale)."""
    tiny_components: dict[str, str]
    """Component → kind of local conversations standing in for it (`tiny_chat.CHAT_KINDS`)."""
    tiny_template: str = "chatml"
    """Chat template at tiny scale (ChatML: the tiny BPE tokenizes its header the same in training and at
    generation; see docs/post-training.md)."""
    tiny_eval_every: int = 25
    """Held-out chat bits-per-byte every this many steps at tiny scale."""

    def base_step(self, scale: Scale) -> Step[TrainConfig]:
        """The base recipe's final step: full, or tiny (the same step `--scale tiny` of the base builds)."""
        base = self.base.recipe
        if scale is self.tiny:
            return tiny_recipe_steps(base, self.base.tiny, self.base.tiny_eval_every)[0][base.final]
        return self.base.build_steps(scale)[base.final]

    def build_steps(self, scale: Scale = FULL) -> dict[str, Step[TrainConfig]]:
        """Phase name → SFT step at `scale`, caches from $TOOTSIE_COMPONENTS."""
        return sft_steps(self.recipe, scale, components_from_env(), self.base_step(scale))

    def plan(self, scale: Scale = FULL) -> dict[str, Any]:
        """The JSON plan at `scale` (what `tootsie run --dry-run --json` prints)."""
        return sft_plan(self.recipe, self.build_steps(scale), scale, self.base_step(scale))

    def tiny_steps(self) -> tuple[dict[str, Step[TrainConfig]], list[Step[Any]]]:
        """The tiny SFT steps and the steps around them: chat data, tokenization and the two reports."""
        base = self.base_step(self.tiny)
        tokenizer = tiny_data_steps().tokenizer
        chat = Step(
            f"{self.recipe.name}/tiny-chat",
            build_tiny_chat,
            TinyChatConfig(components=self.tiny_components),
            description="local conversations standing in for the SFT datasets",
        )

        def tokenized(name: str, subpath: str) -> StepRef:
            config = ChatTokenizeConfig(input=chat.ref(subpath), tokenizer=tokenizer, chat_template=self.tiny_template)
            return Step(f"{self.recipe.name}/tiny-chat-tokenized/{name}", tokenize_chat, config).ref()

        components = {name: tokenized(name, f"{COMPONENTS_DIR}/{name}.jsonl") for name in self.tiny_components}
        kinds = sorted(set(self.tiny_components.values()))
        heldout = {kind: tokenized(f"heldout-{kind}", f"{HELDOUT_DIR}/{kind}.jsonl") for kind in kinds}
        evaluation = InLoopEvalConfig(
            heldout=heldout, tokenizer=tokenizer, every_steps=self.tiny_eval_every, max_sequences=16
        )
        steps = sft_steps(self.recipe, self.tiny, components, base, evaluation)
        final = steps[self.recipe.final]
        report = Step(
            f"{self.recipe.name}/report",
            summarize_runs,
            RunSummaryConfig(runs={name: step.ref() for name, step in steps.items()}),
            description="merged metrics and report.html of the SFT",
        )
        losses = Step(
            f"{self.recipe.name}/assistant-loss",
            assistant_loss_report,
            AssistantLossReportConfig(
                model=final.config.model,
                checkpoints={"base": base.ref(), "sft": final.ref()},
                heldout=heldout,
                seq_len=final.config.data.seq_len,
            ),
            description="held-out assistant-token loss of the base and of the SFT model",
        )
        return steps, [report, losses]

    def selected(self) -> tuple[Scale, list[Step[Any]], Callable[[], dict[str, Any]]]:
        """SCALE, STEPS and PLAN at the scale $TOOTSIE_SCALE names."""
        scale = selected_scale({"full": FULL, "tiny": self.tiny})
        if scale is self.tiny:
            steps, reports = self.tiny_steps()
            plan = partial(sft_plan, self.recipe, steps, self.tiny, self.base_step(self.tiny))
            return scale, [*steps.values(), *reports], plan
        return scale, list(self.build_steps().values()), partial(self.plan, FULL)
