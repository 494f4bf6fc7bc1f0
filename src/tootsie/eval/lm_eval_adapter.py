"""A tootsie model as an lm-eval-harness language model (`pip install 'tootsie[lmeval]'`).

`TootsieLM` implements lm-eval's three request types on a `LlamaModel` and the
tokenizer it was trained with; `tootsie.eval.lm_scoring` scores, `tootsie.models.generate` decodes:

- `loglikelihood(context, continuation)`: the pair is encoded as lm-eval's
  `TemplateLM` does (trailing context spaces move to the continuation; an empty
  context becomes the BOS token), except that a token BPE merges across the
  boundary belongs to the continuation; the continuation's summed
  log-probability and "is it the greedy continuation" come back.
- `loglikelihood_rolling(text)`: the text's tokens are cut into disjoint
  windows of `max_length` predicted tokens (lm-eval's
  `get_rolling_token_windows` with `context_len=1`), the first conditioned on
  BOS, and the windows' log-likelihoods add up.
- `generate_until(context, {until, max_gen_toks})`: argmax decoding with the KV
  cache (`tootsie.models.generate`) until EOS, `max_gen_toks` tokens or a stop
  string; the text is cut before the first stop string. Sampling is refused:
  tootsie's evaluations are deterministic.

With `chat_template` (a Jinja source), lm-eval's `apply_chat_template=True`
renders each request's messages with it (`TaskSuite.evaluate(apply_chat_template=True)`),
and generation also stops at the template's end-of-turn token.

Every encoded context starts with BOS, as every training document does
(`TokenizeConfig.add_bos`). Importing this module sets `HF_DATASETS_OFFLINE`
and `HF_HUB_OFFLINE` (unless already set) before lm-eval imports `datasets`,
so tasks load local data files only and a task that names a hub dataset fails
instead of downloading.
"""

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # before lm_eval imports `datasets`, which reads it once
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from lm_eval.api.model import TemplateLM  # noqa: E402
from lm_eval.evaluator import evaluate  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from tootsie.datakit.chat_templates import load_chat_template, render_chat, template_sha256  # noqa: E402
from tootsie.datakit.special_tokens import load_with_special_tokens, resolve_special_tokens  # noqa: E402
from tootsie.errors import TootsieError  # noqa: E402
from tootsie.eval.lm_eval_tasks import builtin_tasks, write_tasks  # noqa: E402
from tootsie.eval.lm_scoring import Scorer  # noqa: E402
from tootsie.eval.text_generation import DEFAULT_CHAT_TEMPLATE, TextGenerator  # noqa: E402
from tootsie.models.generate import SamplingConfig  # noqa: E402
from tootsie.models.llama import LlamaModel  # noqa: E402
from tootsie.train.checkpoint import has_tree, model_config_of  # noqa: E402
from tootsie.train.loading import load_model, resolve_checkpoint  # noqa: E402

DEFAULT_MAX_GEN_TOKS = 256
"""lm-eval's default generation budget (HFLM's `max_gen_toks`)."""


class TootsieLM(TemplateLM):
    """lm-eval `LM` over a tootsie `LlamaModel` and its tokenizer (BOS/EOS from the tokenizer or its config)."""

    def __init__(
        self,
        model: LlamaModel,
        tokenizer: Tokenizer | str | Path,
        max_length: int,
        batch_size: int = 8,
        max_gen_toks: int = DEFAULT_MAX_GEN_TOKS,
        chat_template: str | None = None,
    ) -> None:
        super().__init__()
        self.tootsie_tokenizer, special = (
            (tokenizer, resolve_special_tokens(tokenizer, None))
            if isinstance(tokenizer, Tokenizer)
            else load_with_special_tokens(tokenizer)
        )
        if self.tootsie_tokenizer.get_vocab_size() > model.config.vocab_size:
            raise TootsieError(
                f"the tokenizer has {self.tootsie_tokenizer.get_vocab_size()} tokens"
                f" but the model only {model.config.vocab_size}; pass the tokenizer the model was trained with"
            )
        self.scorer = Scorer(model, max_length=max_length, batch_size=batch_size)
        self.max_gen_toks = max_gen_toks
        self.bos_id = special.require("bos")
        self.eos_id = special.require("eos")
        self.chat_template = chat_template
        self.generator = TextGenerator(
            model, self.tootsie_tokenizer, special, chat_template or load_chat_template(DEFAULT_CHAT_TEMPLATE)
        )

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: str,
        tokenizer: str,
        weights: str = "model",
        max_length: int = 128,
        batch_size: int = 8,
        chat_template: str | None = None,
    ) -> "TootsieLM":
        """Load a checkpoint (or a training output directory's newest one) with the model config in its state.json.

        `chat_template` is a built-in template's name or a Jinja file.
        """
        path = resolve_checkpoint(checkpoint)
        config = model_config_of(path)
        if weights == "ema" and not has_tree(path, "ema"):
            raise TootsieError(f"{path} has no EMA weights; evaluate weights='model' or train with ema enabled")
        model = load_model(config, str(path), weights=weights)
        template = load_chat_template(chat_template) if chat_template is not None else None
        return cls(model, tokenizer, max_length=max_length, batch_size=batch_size, chat_template=template)

    @property
    def max_length(self) -> int:
        """Longest input the model sees; longer inputs are left-truncated."""
        return self.scorer.max_length

    @property
    def eot_token_id(self) -> int:
        """End of text: the EOS token every training document ends with."""
        return self.eos_id

    @property
    def prefix_token_id(self) -> int:
        """What an empty context (and the first rolling window) is conditioned on: BOS, as at every document start."""
        return self.bos_id

    @property
    def tokenizer_name(self) -> str:
        """Fingerprint of the tokenizer and chat template for lm-eval's request caches (stable across processes)."""
        template = template_sha256(self.chat_template)[:16] if self.chat_template is not None else "none"
        return f"tootsie-{self.tootsie_tokenizer.get_vocab_size()}-{template}"

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """lm-eval's messages rendered with the chat template (BOS included, as training chats start)."""
        if self.chat_template is None:
            raise TootsieError("this TootsieLM has no chat template; pass chat_template= to apply one")
        return render_chat(
            self.chat_template,
            chat_history,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.tok_decode([self.bos_id], skip_special_tokens=False),
        )

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs: Any) -> list[int]:
        """Token ids of `string`, after a BOS unless `add_special_tokens=False` or the text already starts with it."""
        ids = self.tootsie_tokenizer.encode(string, add_special_tokens=False).ids
        if add_special_tokens is False or (ids and ids[0] == self.bos_id):
            return ids
        return [self.bos_id, *ids]

    def tok_decode(self, tokens: list[int], skip_special_tokens: bool = True) -> str:
        """Text of token ids."""
        return self.tootsie_tokenizer.decode(tokens, skip_special_tokens=skip_special_tokens)

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Split the encoding of context + continuation where it stops agreeing with the context's own encoding.

        lm-eval's split (`whole[len(context_ids):]`) loses tokens when BPE merges
        across the boundary (`")" + ":"` → `"):"`), and can leave the continuation
        empty; here the merged token goes to the continuation, so it is scored.
        """
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        whole, context_ids = self.tok_encode(context + continuation), self.tok_encode(context)
        shared = next(
            (i for i, (a, b) in enumerate(zip(whole, context_ids)) if a != b), min(len(whole), len(context_ids))
        )
        return whole[:shared], whole[shared:]

    def _loglikelihood_tokens(
        self, requests: list[tuple[tuple[str, str], list[int], list[int]]], disable_tqdm: bool = False, **kwargs: Any
    ) -> list[tuple[float, bool]]:
        """Score encoded (context, continuation) pairs."""
        results = self.scorer.continuation_logprobs([(context, continuation) for _, context, continuation in requests])
        for (pair, _, _), result in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood", pair, result)
        return results

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """Log-likelihood of whole texts, over disjoint windows of at most `max_length` predicted tokens."""
        pairs, owners = [], []
        for index, request in enumerate(requests):
            (text,) = request.args
            windows = get_rolling_token_windows(
                self.tok_encode(text, add_special_tokens=False),
                prefix_token=self.prefix_token_id,
                max_seq_len=self.max_length,
                context_len=1,
            )
            for context, continuation in map(make_disjoint_window, windows):
                pairs.append((context, continuation))
                owners.append(index)
        totals = [0.0] * len(requests)
        for owner, (logprob, _) in zip(owners, self.scorer.continuation_logprobs(pairs)):
            totals[owner] += logprob
        for request, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
        return totals

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Greedy continuations of each context with the KV cache, cut before the first stop string.

        Requests sharing a budget and stop strings decode together, `batch_size` at a time; a context keeps
        its last `max_length - max_gen_toks` tokens, as lm-eval's own models truncate.
        """
        groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
        prompts = []
        for index, request in enumerate(requests):
            context, options = request.args
            if options.get("do_sample") or float(options.get("temperature", 0.0) or 0.0) > 0:
                raise TootsieError(
                    f"generation options {options} ask for sampling;"
                    " TootsieLM decodes greedily only (set do_sample: false, temperature: 0)"
                )
            until = options.get("until") or []
            stops = (until,) if isinstance(until, str) else tuple(s for s in until if s)
            budget = max(1, min(int(options.get("max_gen_toks", self.max_gen_toks)), self.max_length - 1))
            groups.setdefault((budget, stops), []).append(index)
            prompts.append(self.tok_encode(context)[-(self.max_length - budget) :])
        texts = [""] * len(requests)
        for (budget, stops), members in groups.items():
            sampling = SamplingConfig(max_new_tokens=budget, stop_strings=stops)
            for start in range(0, len(members), self.scorer.batch_size):
                chunk = members[start : start + self.scorer.batch_size]
                results = self.generator.generate(
                    [prompts[i] for i in chunk], sampling, chat=self.chat_template is not None
                )
                for index, result in zip(chunk, results):
                    texts[index] = result.text
        for request, text in zip(requests, texts):
            self.cache_hook.add_partial("generate_until", request.args, text)
        return texts


def flatten_results(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """lm-eval's per-task results as `{task: {metric: value}}`; non-numbers dropped.

    Metric names: `acc,none` → `acc`, `exact_match,strict` → `exact_match/strict`.
    """
    flat = {}
    for task, values in sorted(results.items()):
        metrics = {}
        for key, value in values.items():
            if "," not in key or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            metric, _, filter_name = key.partition(",")
            metrics[metric if filter_name == "none" else f"{metric}/{filter_name}"] = float(value)
        flat[task] = metrics
    return flat


class TaskSuite:
    """lm-eval tasks resolved once (tootsie's built-in local tasks plus include paths), run on any number of models.

    The built-in tasks are written under `work_dir`. lm-eval's own catalogue is
    not indexed (some 15k tasks, about a minute on 2 cores, and their data sit
    on the Hub); to run one of its tasks, point a copy of its YAML at local
    data files and pass the directory as an include path.
    """

    def __init__(self, tasks: Sequence[str], work_dir: str | Path, include_paths: Sequence[str] = ()) -> None:
        if not tasks:
            raise TootsieError(
                "no lm-eval tasks given; name at least one (built-in: "
                + ", ".join(t.name for t in builtin_tasks())
                + ")"
            )
        for path in include_paths:
            if not Path(path).is_dir():
                raise TootsieError(
                    f"lm-eval include path {path} is not a directory; pass a directory of task YAML files"
                )
        builtin_dir = write_tasks(builtin_tasks(), Path(work_dir) / "builtin")
        self.manager = TaskManager(include_path=[str(builtin_dir), *map(str, include_paths)], include_defaults=False)
        unknown = [name for name in tasks if name not in self.manager.all_tasks and not Path(name).is_file()]
        if unknown:
            raise TootsieError(
                f"unknown lm-eval tasks {unknown}; known: {sorted(self.manager.all_tasks)}"
                " (add --include-path DIR for your own task YAMLs)"
            )
        self.tasks = list(tasks)

    def evaluate(
        self,
        lm: TemplateLM,
        limit: int | None = None,
        num_fewshot: int | None = None,
        stderr: bool = True,
        seed: int = 1234,
        apply_chat_template: bool = False,
    ) -> dict[str, dict[str, float]]:
        """Every task's metrics for `lm`: `{task: {metric: value, "samples": n}}`.

        Only the first `limit` documents of each task are scored when `limit` is given.
        Calls `lm_eval.evaluator.evaluate` with the task setup `simple_evaluate`
        does (zero-shot unless the task or `num_fewshot` says otherwise, a fixed
        few-shot seed), without its environment report, which shells out to git.
        `apply_chat_template=True` renders each request through the model's chat template.
        """
        try:
            loaded = self.manager.load(self.tasks)
        except ConnectionError as error:
            raise TootsieError(
                f"an lm-eval task needs data from the Hugging Face Hub, and tootsie runs offline: {error};"
                " give the task local data_files"
            ) from error
        for task in loaded["tasks"].values():
            if num_fewshot is not None and task.get_config("num_fewshot") != 0:
                task.set_config(key="num_fewshot", value=num_fewshot)
            elif task.get_config("num_fewshot") is None:
                task.set_config(key="num_fewshot", value=0)
            task.set_fewshot_seed(seed=seed)
        random.seed(seed)
        np.random.seed(seed)  # lm-eval's bootstrap and sampling draw from the global NumPy generator
        output = evaluate(
            lm=lm,
            task_dict=loaded,
            limit=limit,
            bootstrap_iters=100_000 if stderr else 0,
            log_samples=False,
            apply_chat_template=apply_chat_template,
        )
        metrics = flatten_results(output["results"])
        for task, counts in output.get("n-samples", {}).items():
            if task in metrics:
                metrics[task]["samples"] = float(counts["effective"])
        return metrics
