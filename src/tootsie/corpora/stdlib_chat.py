"""A small chat set built from the running Python's own docstrings: no network, real text.

Each public function or class of a few standard-library modules gives one
conversation: the user asks "What does `module.name` do?" and the assistant
answers with the first paragraph of its docstring (whitespace collapsed),
behind a fixed system message. Names are sorted, so the set is a function of
the config and the interpreter (`stdlib_source.PythonIdentity`, in the config,
hence in the output path). The docstrings are read in a fresh interpreter that
sees only the standard library (`stdlib_source.run_stdlib_only`): in the
caller's process `builtins` also holds what `site` and others put there (`help`,
`copyright`, a profiler's `profile`), which would make the set depend on how
the step was started. Every `heldout_every`-th conversation goes to
`heldout.jsonl`, the rest to `train.jsonl`; both are written atomically.

Example: `builtins.len` gives
`[system: "Answer questions about Python's standard library in one paragraph.",
user: "What does `len` do?", assistant: "Return the number of items in a container."]`.
"""

import inspect
import json
import os
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

from tootsie.corpora.stdlib_source import PythonIdentity, python_identity, run_stdlib_only

SYSTEM_PROMPT = "Answer questions about Python's standard library in one paragraph."
TRAIN_FILE = "train.jsonl"
HELDOUT_FILE = "heldout.jsonl"
DEFAULT_MODULES = ("builtins", "os.path", "json", "math", "string", "textwrap", "shutil", "functools", "itertools")


@dataclass(frozen=True)
class StdlibChatConfig:
    """Which modules' docstrings become conversations, and how many are held out."""

    modules: tuple[str, ...] = DEFAULT_MODULES
    """Standard-library modules whose public callables are asked about."""
    max_answer_chars: int = 400
    """Answers (first docstring paragraphs) longer than this are left out."""
    heldout_every: int = 10
    """Every this-many-th conversation (in name order) is held out."""
    python: PythonIdentity = field(default_factory=python_identity)
    """The interpreter whose docstrings are read (part of the output's identity)."""


def _first_paragraph(obj: object) -> str | None:
    doc = inspect.getdoc(obj)
    if not doc:
        return None
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    return paragraph or None


def stdlib_conversations(config: StdlibChatConfig) -> list[list[dict[str, str]]]:
    """One system/user/assistant conversation per documented public callable of `config.modules`.

    Read in a fresh stdlib-only interpreter (`conversations_here` there), so the caller's process cannot change them."""
    request = {"modules": list(config.modules), "max_answer_chars": config.max_answer_chars}
    return run_stdlib_only("tootsie.corpora.stdlib_chat", "conversations_here", request)


def conversations_here(request: dict[str, Any]) -> list[list[dict[str, str]]]:
    """`stdlib_conversations` in this process, from `{"modules", "max_answer_chars"}`."""
    conversations = []
    for module_name in request["modules"]:
        module = import_module(module_name)
        prefix = "" if module_name == "builtins" else f"{module_name}."
        for name in sorted(vars(module)):
            obj = getattr(module, name)
            if name.startswith("_") or not callable(obj):
                continue
            answer = _first_paragraph(obj)
            if answer is None or len(answer) > request["max_answer_chars"] or answer.startswith(name + "("):
                continue
            conversations.append(
                [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"What does `{prefix}{name}` do?"},
                    {"role": "assistant", "content": answer},
                ]
            )
    return conversations


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary sibling and `os.replace`."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def build_stdlib_chat(config: StdlibChatConfig, output_path: str) -> dict[str, int]:
    """Write `train.jsonl` and `heldout.jsonl` under `output_path`; return their conversation counts."""
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    conversations = stdlib_conversations(config)
    splits: dict[str, list[str]] = {TRAIN_FILE: [], HELDOUT_FILE: []}
    for index, messages in enumerate(conversations):
        split = HELDOUT_FILE if index % config.heldout_every == config.heldout_every - 1 else TRAIN_FILE
        splits[split].append(json.dumps({"messages": messages}, ensure_ascii=False))
    for name, lines in splits.items():
        write_text_atomic(out / name, "".join(line + "\n" for line in lines))
    return {"train": len(splits[TRAIN_FILE]), "heldout": len(splits[HELDOUT_FILE])}
