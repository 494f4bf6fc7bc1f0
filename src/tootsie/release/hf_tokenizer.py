"""The tokenizer files of a Hugging Face export, with BOS/EOS ids read from the tokenizer itself.

tootsie's token caches put the tokenizer's BOS before and its EOS after every
document (`datakit.special_tokens` finds them: `<|bos|>`/`<|eos|>` for
tootsie's own tokenizers, `<|begin_of_text|>`/`<|end_of_text|>` for Llama 3's),
so the exported `tokenizer.json` prepends BOS in its post-processor (a
tokenizer whose template already does, like Llama 3's, is kept as it is):
`AutoTokenizer(text)` then yields the ids the model was trained on. Every id written to `tokenizer_config.json`,
`generation_config.json` and `config.json` comes from `token_to_id` on the
tokenizer that is exported, never from a constant: Marin's first export wrote
a wrong `eos_token_id`, and a test checks ours against the tokenizer.
"""

from collections.abc import Iterable
from pathlib import Path

from tokenizers import processors

from tootsie.datakit.special_tokens import TOKENIZER_CONFIG_FILE, load_with_special_tokens, template_tokens
from tootsie.datakit.tokenizer import TOKENIZER_FILE
from tootsie.errors import TootsieError
from tootsie.executor.portable import resolve_recorded
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.monitor.metrics_log import CONFIG_FILE
from tootsie.release.step_info import StepInfo, read_step

SPECIAL_TOKENS_FILE = "special_tokens_map.json"


TOKENIZE_STEP_TYPES = frozenset({"TokenizeConfig", "ChatTokenizeConfig"})
"""Config classes of the executor steps that write token caches (text and chat)."""


def caches_tokenizer(caches: Iterable[Path | None], where: Path) -> Path | None:
    """The tokenizer.json that made these token caches, found through their tokenize steps' records."""
    found = set()
    for cache in caches:
        cache_step = read_step(cache) if cache is not None else None
        if cache_step is not None and cache_step.type in TOKENIZE_STEP_TYPES:
            found.add(cache_step.resolve(cache_step.config.get("tokenizer")))
    found.discard(None)
    if len(found) > 1:
        raise TootsieError(
            f"the caches of {where} were made with different tokenizers {sorted(map(str, found))}; pass --tokenizer"
        )
    return found.pop() if found else None


def training_tokenizer(run: StepInfo) -> Path | None:
    """The tokenizer.json that made a training step's token caches."""
    caches = run.config.get("data", {}).get("caches", {}).values()
    return caches_tokenizer((run.resolve(ref) for ref in caches), run.directory)


def run_tokenizer(run: Path) -> Path | None:
    """The tokenizer.json that made the caches of a `tootsie train --out` run (named in its config.json)."""
    config = read_json(run / CONFIG_FILE) or {}
    caches = config.get("data", {}).get("caches", {})
    named = caches.values() if isinstance(caches, dict) else ()
    paths = (Path(resolve_recorded(c, run)) for c in named if isinstance(c, str))  # a step's: relative to its prefix
    return caches_tokenizer(paths, run)


def write_tokenizer_files(
    source: Path, directory: Path, model_max_length: int, vocab_size: int, chat_template: str | None = None
) -> dict[str, int]:
    """Write tokenizer.json (BOS prepended), tokenizer_config.json (with `chat_template` when given) and
    special_tokens_map.json; return the special ids."""
    tokenizer, special = load_with_special_tokens(source)
    bos_id, eos_id = special.require("bos"), special.require("eos")
    bos, eos = special.bos, special.eos
    if tokenizer.get_vocab_size() > vocab_size:
        raise TootsieError(
            f"tokenizer {source} has {tokenizer.get_vocab_size()} tokens but the "
            f"model only {vocab_size} embeddings; export with the run's own tokenizer"
        )
    if template_tokens(tokenizer) != (bos, None):
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A:0", pair=f"{bos} $A:0 {bos}:1 $B:1", special_tokens=[(bos, bos_id)]
        )
    tmp = directory / f".{TOKENIZER_FILE}.tmp"
    tokenizer.save(str(tmp))
    tmp.replace(directory / TOKENIZER_FILE)
    added = {
        str(token_id): {
            "content": token.content,
            "special": True,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "single_word": False,
        }
        for token_id, token in sorted(tokenizer.get_added_tokens_decoder().items())
    }
    write_json_atomic(
        directory / TOKENIZER_CONFIG_FILE,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": bos,
            "eos_token": eos,
            "add_bos_token": True,
            "add_eos_token": False,
            "model_max_length": model_max_length,
            "clean_up_tokenization_spaces": False,
            "added_tokens_decoder": added,
        }
        | ({"chat_template": chat_template} if chat_template is not None else {}),
    )
    write_json_atomic(directory / SPECIAL_TOKENS_FILE, {"bos_token": bos, "eos_token": eos})
    return {"bos_token_id": bos_id, "eos_token_id": eos_id}
