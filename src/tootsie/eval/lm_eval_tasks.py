"""lm-eval tasks from local files: a task spec → a JSONL data file plus the YAML lm-eval reads.

lm-eval defines tasks in YAML. With `dataset_path: json` and an absolute
`data_files` path, a task reads a local JSONL file through `datasets`' JSON
builder and never touches the Hugging Face Hub. `write_tasks` writes such a
pair per `LocalTask` into a directory, which `TaskManager(include_path=...)`
then indexes; the Arrow cache `datasets` builds goes inside the same directory.

Three kinds cover lm-eval's request types, each with a fixed record schema:

| kind | record fields | requests | metrics |
| --- | --- | --- | --- |
| `multiple_choice` | context, choices, answer (index) | loglikelihood per choice | acc, acc_norm |
| `generate_until` | context, target | greedy generation | exact_match |
| `loglikelihood_rolling` | text | rolling loglikelihood | word/byte perplexity, bits_per_byte |

`builtin_tasks()` are small tasks made on the machine with no download, so a
tootsie model can be run through lm-eval anywhere (the demo, the tests, the
in-loop evaluation): Python syntax choices and line endings (the demo trains
on the standard library's code), and the Zen of Python as text to score, read
from the running Python's `this` module.
"""

import ast
import codecs
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tootsie.errors import TootsieError
from tootsie.storage import write_bytes

KINDS = {
    "multiple_choice": ("context", "choices", "answer"),
    "generate_until": ("context", "target"),
    "loglikelihood_rolling": ("text",),
}
DATASETS_CACHE = ".hf_datasets_cache"


@dataclass(frozen=True)
class LocalTask:
    """An lm-eval task whose documents are given here, written to a local JSONL file."""

    name: str
    """Task name, as passed to `--tasks` (letters, digits, `_`, `-`)."""
    kind: str
    """One of KINDS: multiple_choice, generate_until, loglikelihood_rolling."""
    records: tuple[dict[str, Any], ...]
    """The documents, each with the fields its kind needs (see the module table)."""
    target_delimiter: str = " "
    """Text between context and choice or target (lm-eval's default is a space; "" for code)."""
    until: tuple[str, ...] = ("\n",)
    """generate_until: stop strings."""
    max_gen_toks: int = 32
    """generate_until: most tokens generated per document."""

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ValueError(f"name must be letters, digits, '_' or '-', got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        if not self.records:
            raise ValueError(f"task {self.name!r} has no records")
        if self.max_gen_toks <= 0:
            raise ValueError(f"max_gen_toks must be positive, got {self.max_gen_toks}")
        for index, record in enumerate(self.records):
            missing = [key for key in KINDS[self.kind] if key not in record]
            if missing:
                raise ValueError(
                    f"task {self.name!r} record {index} lacks {missing};"
                    f" a {self.kind} record needs {list(KINDS[self.kind])}"
                )
            if self.kind == "multiple_choice" and not 0 <= record["answer"] < len(record["choices"]):
                raise ValueError(
                    f"task {self.name!r} record {index}: answer {record['answer']}"
                    f" is not an index into its {len(record['choices'])} choices"
                )


def _metrics(kind: str) -> list[dict[str, Any]]:
    if kind == "multiple_choice":
        return [{"metric": name, "aggregation": "mean", "higher_is_better": True} for name in ("acc", "acc_norm")]
    if kind == "generate_until":
        return [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]
    return [
        {"metric": "word_perplexity", "aggregation": "weighted_perplexity", "higher_is_better": False},
        {"metric": "byte_perplexity", "aggregation": "weighted_perplexity", "higher_is_better": False},
        {"metric": "bits_per_byte", "aggregation": "bits_per_byte", "higher_is_better": False},
    ]


def task_yaml(task: LocalTask, data_file: Path, cache_dir: Path) -> dict[str, Any]:
    """The lm-eval task config reading `data_file` (absolute) as the test split."""
    config: dict[str, Any] = {
        "task": task.name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file.resolve())}, "cache_dir": str(cache_dir.resolve())},
        "test_split": "test",
        "output_type": task.kind,
        "metric_list": _metrics(task.kind),
        "metadata": {"version": 1},
    }
    if task.kind == "multiple_choice":
        config |= {
            "doc_to_text": "context",
            "doc_to_choice": "choices",
            "doc_to_target": "answer",
            "target_delimiter": task.target_delimiter,
        }
    elif task.kind == "generate_until":
        config |= {
            "doc_to_text": "context",
            "doc_to_target": "target",
            "target_delimiter": task.target_delimiter,
            "generation_kwargs": {"until": list(task.until), "max_gen_toks": task.max_gen_toks, "do_sample": False},
        }
    else:
        config |= {"doc_to_text": "", "doc_to_target": "text"}
    return config


def write_tasks(tasks: Sequence[LocalTask], directory: str | Path) -> Path:
    """Write `<name>.jsonl` and `<name>.yaml` for every task into `directory` (an lm-eval include path); return it."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        data_file = out / f"{task.name}.jsonl"
        write_bytes(
            str(data_file),
            "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in task.records).encode("utf-8"),
        )
        write_bytes(
            str(out / f"{task.name}.yaml"),
            yaml.safe_dump(
                task_yaml(task, data_file, out / DATASETS_CACHE), sort_keys=False, allow_unicode=True
            ).encode("utf-8"),
        )
    return out


# Python code prefixes, the correct continuation first; the choices are rotated so the answer index varies.
_SYNTAX_CHOICES = (
    ("for key, value in mapping.items()", (":", ";", " then:", " do")),
    ("def __init__(self", (", *args, **kwargs):", "; *args, **kwargs):", ", *args, **kwargs);", " *args **kwargs):")),
    ("import os\nimport", (" sys", " 3", " (", " =")),
    ("if value is", (" None:", " Null:", " nil:", " none;")),
    ("raise", (" ValueError(", " ValueError[", " ValueError{", " valueerror(")),
    ("    except", (" KeyError:", " KeyError;", " KeyError =>", " KeyError::")),
    ("class Config", ("(object):", "[object]:", "{object}:", "<object>:")),
    ("with open(path) as", (" f:", " f;", " (f):", " f =>")),
    ("while True", (":", ";", " {", " do")),
    ("from collections import", (" OrderedDict", " 42", " (", " =")),
    ("key = lambda item", (": item[0]", " => item[0]", " -> item[0]", "; item[0]")),
    ("self.assertEqual(result", (", expected)", "; expected)", " expected)", ", expected]")),
    ("squares = [i * i for i in range(10)", ("]", ")", "}", ">")),
    ("counts = {'a'", (": 1}", " = 1}", " => 1}", " -> 1}")),
    ("if __name__ == '__main__'", (":", ";", " then", " {")),
    ("    try", (":", ";", " {", "()")),
    ("def area(width, height", ("):", ");", "]:", "}:")),
    ("    elif", (" x > 0:", " x > 0;", " x > 0 then", " (x > 0) {")),
    ("    return", (" self", " this", " me", " @")),
    ("print('hello'", (")", "]", "}", ">")),
)
# A line's opening, and the rest of it up to the newline.
_LINE_ENDINGS = (
    ("for i in range(10)", ":"),
    ("while True", ":"),
    ("def main()", ":"),
    ("class Error(Exception)", ":"),
    ("if __name__ == '__main__'", ":"),
    ("with open(path) as f", ":"),
    ("    except ValueError", ":"),
    ("    def __init__(self)", ":"),
    ("x = [1, 2, 3", "]"),
    ("counts = {'a': 1", "}"),
    ("print('hello'", ")"),
    ("self.assertEqual(a, b", ")"),
)


def zen_of_python() -> list[str]:
    """The 19 aphorisms of PEP 20, decoded from the running Python's `this.py` (read, not imported, which prints)."""
    spec = importlib.util.find_spec("this")
    if spec is None or spec.origin is None:
        raise TootsieError(
            "this Python has no `this` module to read the Zen of Python from; use tasks of your own (--include-path)"
        )
    source = Path(spec.origin).read_text(encoding="utf-8")
    encoded = next(
        node.value.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    )
    return [line for line in codecs.decode(encoded, "rot13").splitlines()[1:] if line.strip()]


def builtin_tasks() -> tuple[LocalTask, ...]:
    """Tasks built on this machine with no download: `tootsie_pysyntax`, `tootsie_pylines`, `tootsie_zen`."""
    syntax = []
    for index, (context, choices) in enumerate(_SYNTAX_CHOICES):
        shift = index % len(choices)
        syntax.append(
            {
                "context": context,
                "choices": list(choices[-shift:] + choices[:-shift]) if shift else list(choices),
                "answer": shift,
            }
        )
    return (
        LocalTask("tootsie_pysyntax", "multiple_choice", tuple(syntax), target_delimiter=""),
        LocalTask(
            "tootsie_pylines",
            "generate_until",
            tuple({"context": c, "target": t} for c, t in _LINE_ENDINGS),
            target_delimiter="",
            until=("\n",),
            max_gen_toks=8,
        ),
        LocalTask("tootsie_zen", "loglikelihood_rolling", tuple({"text": line} for line in zen_of_python())),
    )
