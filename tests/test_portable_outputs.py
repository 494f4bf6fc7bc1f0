"""One hash, one content: outputs name their inputs relative to the prefix, so two prefixes give the same bytes.

A small experiment runs each writer that records paths (token and chat cache
ledgers, decontamination report, training config files and warm-start report,
run summary and HTML report) as a step under two prefixes; every output file
must be byte-identical and none may hold its prefix. The readers then find
what the relative paths name, also after the prefix moved. The tiny demo does
the same end to end (slow).
"""

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pytest

from tootsie.configfile import to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import ChatTokenizeConfig, TokenizeConfig, tokenize_chat, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.eval.run_chat_template import run_chat_template
from tootsie.executor import Step, build_graph, run_experiment
from tootsie.executor.manifest import EXECUTOR_FILES, differing, read_manifest
from tootsie.executor.portable import resolve_recorded, step_places, step_prefix
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig
from tootsie.report.data import load_run_directory
from tootsie.report.run_summary import RunSummaryConfig, summarize_runs
from tootsie.train.checkpoint import STATE_FILE
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.config_drift import HASHED_CONFIG_FILE, check_resume, prepare_run
from tootsie.train.schedule import WSDConfig
from tootsie.train.stability import StabilityConfig

INLINE = EngineConfig(workers=1, progress=False)
MODEL = LlamaConfig(vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)
TEMPLATE = (
    "{% for m in messages %}{{ '### ' + m['role'] + ':\\n' }}{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}{% endfor %}"
)


@dataclass(frozen=True)
class InputsConfig:
    """How many documents the inputs step writes."""

    documents: int = 120


def write_inputs(config: InputsConfig, output_path: str) -> None:
    """Documents, an eval set with one planted item, conversations and a chat template file."""
    out = Path(output_path)
    texts = [f"def function_{i}(x):\n    return x * {i}  # the {i}th function of the module\n" for i in range(120)]
    question = "how many clips did Natalia sell in April and May if she sold half as many in May as in April"
    texts[7] = f"A worked problem: {question}? Answer: 72."
    write_table_atomic(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), out / "docs" / "p.parquet")
    (out / "eval.jsonl").write_text(json.dumps({"id": "gsm:1", "question": question}) + "\n", encoding="utf-8")
    conversation = [{"role": "user", "content": "What does len do?"}, {"role": "assistant", "content": "Counts."}]
    (out / "chat.jsonl").write_text(json.dumps({"messages": conversation}) + "\n", encoding="utf-8")
    (out / "template.jinja").write_text(TEMPLATE, encoding="utf-8")


@dataclass(frozen=True)
class FakeRunConfig:
    """A finished training run's files, without training: a checkpoint record, config.json and metrics."""

    loss: float
    stability: bool = False


def fake_run(config: FakeRunConfig, output_path: str) -> None:
    """What a training run leaves for a warm start and a summary to read, with fixed metrics (no timing noise)."""
    out = Path(output_path)
    write_json_atomic(out / "checkpoints" / "step-000002" / STATE_FILE, {"step": 2, "model": to_plain(MODEL)})
    stability = {"clip_update_window": 4} if config.stability else {}
    write_json_atomic(out / "config.json", {"num_steps": 2, "model": to_plain(MODEL), "stability": stability})
    records = [
        {"step": s, "loss": config.loss - 0.1 * s, "lr": 1e-3, "tokens": 64 * (s + 1), "tokens_per_s": 100.0}
        for s in range(3)
    ]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def prepare_training(config: TrainConfig, output_path: str) -> None:
    """The training step's first part: record the config files and the warm-start report (no training)."""
    prepare_run(Path(output_path), config, allow_change=False)


def write_figure(config: InputsConfig, output_path: str) -> None:
    """A case study's figure for the summary's report (any bytes: the report embeds them as they are)."""
    (Path(output_path) / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a picture")


def experiment() -> tuple[list[Step], dict[str, Step]]:
    """Every writer that records paths, as steps over one small inputs step."""
    inputs = Step("p/inputs", write_inputs, InputsConfig())
    tokenizer = Step("p/tokenizer", train_tokenizer, TokenizerTrainConfig(inputs=(inputs.ref("docs"),), vocab_size=300))
    tokenizer_file = tokenizer.ref("tokenizer.json")
    tokens = Step("p/tokenized", tokenize_documents, TokenizeConfig(inputs.ref("docs"), tokenizer_file, engine=INLINE))
    chat = Step(
        "p/chat",
        tokenize_chat,
        ChatTokenizeConfig(inputs.ref("chat.jsonl"), tokenizer_file, chat_template=inputs.ref("template.jinja")),
    )
    leaks = Step(
        "p/decontaminate",
        decontaminate,
        DecontaminateConfig(inputs.ref("docs"), (inputs.ref("eval.jsonl"),), ngram=5, engine=INLINE),
    )
    source = Step("p/train/source", fake_run, FakeRunConfig(loss=3.0, stability=True))
    data = MixtureConfig(
        caches={"code": tokens.ref(), "chat": chat.ref()},
        stages=(MixtureStage(0, {"code": 0.5, "chat": 0.5}),),
        seq_len=16,
        batch_schedule=BatchSchedule.constant(4),
    )
    train = TrainConfig(
        model=MODEL,
        data=data,
        num_steps=4,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=2, total_steps=6),
        stability=StabilityConfig(),
        warm_start=WarmStartConfig(checkpoint=source.ref()),
        checkpoints=CheckpointConfig(every_steps=100, every_minutes=None),
    )
    warm = Step("p/train/warm", prepare_training, train)
    other = Step("p/train/other", fake_run, FakeRunConfig(loss=2.5))
    figure = Step("p/figure", write_figure, InputsConfig())
    summary = Step(
        "p/summary",
        summarize_runs,
        RunSummaryConfig(
            runs={"source": source.ref(), "other": other.ref()},
            figures={"A figure": figure.ref("figure.png")},
        ),
    )
    named = {
        "inputs": inputs,
        "tokens": tokens,
        "chat": chat,
        "leaks": leaks,
        "source": source,
        "warm": warm,
        "summary": summary,
    }
    return [leaks, warm, summary], named


def output_files(directory: Path) -> dict[str, bytes]:
    """Every file a step wrote (not the executor's own), by path relative to its directory."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.relative_to(directory).parts[0] not in EXECUTOR_FILES
    }


@pytest.fixture(scope="module")
def two_prefixes(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("portable")
    prefixes = root / "a", root / "elsewhere" / "b"
    for prefix in prefixes:
        report = run_experiment(experiment()[0], prefix)
        assert report.ok, [(s.name, s.error) for s in report.steps]
    return prefixes


def test_every_output_is_byte_identical_under_two_prefixes_and_names_no_prefix(two_prefixes) -> None:
    a, b = two_prefixes
    steps, named = experiment()
    graph = build_graph(steps, a)
    assert len(graph.nodes) == 10
    for node in graph.nodes:
        left, right = output_files(a / node.id), output_files(b / node.id)
        assert left == right, (node.id, [name for name in left if left[name] != right.get(name)])
        assert differing(read_manifest(str(a / node.id)), read_manifest(str(b / node.id))) == []
        for name, content in left.items():
            assert str(a).encode() not in content, f"{node.id}/{name} names its prefix {a}"
    recorded = json.loads((a / graph.node(named["warm"]).id / "config.json").read_text(encoding="utf-8"))
    assert recorded["warm_start"]["checkpoint"].startswith("p/train/source-")
    assert recorded["data"]["caches"]["code"].startswith("p/tokenized-")


def test_readers_resolve_relative_paths_against_the_prefix(two_prefixes) -> None:
    _, b = two_prefixes
    steps, named = experiment()
    graph = build_graph(steps, b)
    summary_dir, warm_dir = (Path(graph.node(named[key]).output_path) for key in ("summary", "warm"))
    assert step_prefix(summary_dir) == str(b)
    loaded = load_run_directory(summary_dir)
    assert {run.label for run in loaded.runs} == {"source", "other"}
    assert all(run.config is not None for run in loaded.runs)
    template = run_chat_template(warm_dir)
    assert template is not None and template.name == str(b / graph.node(named["inputs"]).id / "template.jinja")
    ledger = json.loads((Path(graph.node(named["tokens"]).output_path) / "ledger.json").read_text(encoding="utf-8"))
    assert Path(resolve_recorded(ledger["source"], graph.node(named["tokens"]).output_path)).is_dir()
    report = json.loads((Path(graph.node(named["leaks"]).output_path) / "report.json").read_text(encoding="utf-8"))
    [matched] = report["matched"]
    assert Path(resolve_recorded(matched["file"], graph.node(named["leaks"]).output_path)).is_file()


def test_a_moved_prefix_resumes_without_drift_by_hand_and_under_the_executor(two_prefixes, tmp_path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(two_prefixes[0], moved)
    steps, named = experiment()
    graph = build_graph(steps, moved)
    node = graph.node(named["warm"])
    config = graph.resolved_config(node)
    output = Path(node.output_path)
    assert check_resume(output, config, 2, allow_change=False) == []  # by hand: absolute paths, recorded relative
    places = {str(moved): "", str(output): node.id}
    with step_places(places):
        assert check_resume(output, config, 2, allow_change=False) == []
    recorded = json.loads((output / HASHED_CONFIG_FILE).read_text(encoding="utf-8"))
    recorded["warm_start"]["checkpoint"] = f"/old/prefix/{recorded['warm_start']['checkpoint']}"  # before this change
    write_json_atomic(output / HASHED_CONFIG_FILE, recorded)
    with step_places(places):
        assert check_resume(output, config, 2, allow_change=False) == []
    elsewhere = replace(config, warm_start=replace(config.warm_start, checkpoint=str(tmp_path / "another-run")))
    [change] = check_resume(output, elsewhere, 2, allow_change=True)
    assert change["field"] == "config.warm_start.checkpoint"


def test_by_hand_outputs_record_the_paths_given(two_prefixes, tmp_path, monkeypatch) -> None:
    a, _ = two_prefixes
    steps, named = experiment()
    graph = build_graph(steps, a)
    config = graph.resolved_config(graph.node(named["tokens"]))
    monkeypatch.chdir(a)
    given = replace(config, input=graph.node(named["tokens"]).dependencies[0] + "/docs")
    ledger = tokenize_documents(given, str(tmp_path / "cache"))
    assert ledger["source"] == given.input
    assert resolve_recorded(ledger["source"], tmp_path / "cache") == given.input  # no prefix known: as given
    absolute = tokenize_documents(config, str(tmp_path / "cache-2"))
    assert absolute["source"] == config.input


def test_resolve_recorded_without_executor_metadata(tmp_path) -> None:
    (tmp_path / "p" / "cache-1").mkdir(parents=True)
    run = tmp_path / "p" / "run-2"
    run.mkdir()
    assert step_prefix(run) is None
    assert resolve_recorded("p/cache-1", run) == str(tmp_path / "p" / "cache-1")  # the nearest ancestor holding it
    assert resolve_recorded("p/missing-3", run) == "p/missing-3"
    assert resolve_recorded("/elsewhere/cache", run) == "/elsewhere/cache"
    assert resolve_recorded("s3://bucket/cache", run) == "s3://bucket/cache"


@pytest.mark.slow
@pytest.mark.timeout(900)  # two tiny demos: about 40 s each on 2 idle cores, minutes under load
def test_tiny_demo_outputs_are_identical_under_two_prefixes(tmp_path) -> None:
    from tootsie.demos.stdlib_demo import TINY, build_steps

    prefixes = tmp_path / "a", tmp_path / "elsewhere" / "b"
    for prefix in prefixes:
        assert run_experiment(build_steps(TINY), prefix).ok
    compared = 0
    for node in build_graph(build_steps(TINY), prefixes[0]).nodes:
        left, right = (read_manifest(str(prefix / node.id)) for prefix in prefixes)
        assert left is not None and right is not None, node.id
        assert differing(left, right) == [], node.id
        for entry in left.files:
            content = (prefixes[0] / node.id / entry.path).read_bytes()
            assert str(prefixes[0]).encode() not in content, f"{node.id}/{entry.path} names its prefix"
            compared += Path(entry.path).name in {
                "ledger.json",
                "report.json",
                "config.json",
                "config.hashed.json",
                "warm_start_report.json",
                "summary.json",
            }
    assert compared >= 10
