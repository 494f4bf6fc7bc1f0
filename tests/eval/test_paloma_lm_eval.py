"""tootsie's Paloma micro figure is the number lm-eval's own `paloma_*` task config gives on the same local files."""

import math
from pathlib import Path

import jax
import lm_eval
import pytest

from tests.eval.paloma_fixtures import train_fixture_tokenizer, write_mirror
from tests.eval.tiny_checkpoint import TINY_MODEL
from tootsie.eval.lm_eval_adapter import TaskSuite, TootsieLM
from tootsie.eval.paloma import discover_sources, evaluate_source, prepare_mirror
from tootsie.models.llama import LlamaModel

SEQ_LEN = 8
TEMPLATE = Path(lm_eval.__file__).parent / "tasks" / "paloma" / "_paloma_template"


def _local_task(name: str, source: str, files: list[Path]) -> str:
    """lm-eval's Paloma template, reading local files instead of the hub (and no test split, so val is scored).

    Only the data lines change: `doc_to_target` was `paloma_utils.doc_to_target`, which returns `str(doc["text"])`.
    """
    lines = [f"task: {name}", "dataset_path: json", "dataset_kwargs:", "  data_files:", "    val:"]
    lines += [f"      - {f}" for f in files]
    for line in TEMPLATE.read_text().splitlines():
        if line.startswith(("dataset_path:", "test_split:", "doc_to_target:", "should_decontaminate:", "doc_to_decon")):
            continue
        if line.startswith(("tag:", "  - paloma")):
            continue
        lines.append(line)
    lines.append('doc_to_target: "{{text}}"')
    assert "output_type: loglikelihood_rolling" in lines and "validation_split: val" in lines, source
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_micro_bpb_equals_lm_evals_paloma_bits_per_byte(tmp_path) -> None:
    mirror, tokenizer = write_mirror(tmp_path), train_fixture_tokenizer(tmp_path)
    sources = discover_sources(mirror, "val", ["c4_100_domains", "c4_en"])
    (tmp_path / "tasks").mkdir()
    for source, files in sources.items():
        (tmp_path / "tasks" / f"local_paloma_{source}.yaml").write_text(
            _local_task(f"local_paloma_{source}", source, list(files))
        )
    model = LlamaModel(TINY_MODEL, key=jax.random.PRNGKey(4))
    suite = TaskSuite(
        [f"local_paloma_{s}" for s in sources], tmp_path / "work", include_paths=[str(tmp_path / "tasks")]
    )
    metrics = suite.evaluate(TootsieLM(model, tokenizer, max_length=SEQ_LEN, batch_size=4), limit=None)
    prepared = prepare_mirror(mirror, tokenizer, SEQ_LEN, sources=list(sources))
    for source in sources:
        ours = evaluate_source(model, prepared[source])
        assert math.isclose(metrics[f"local_paloma_{source}"]["bits_per_byte"], ours["micro_bpb"], rel_tol=1e-5), source
