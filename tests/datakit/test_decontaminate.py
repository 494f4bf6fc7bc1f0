"""Decontamination finds planted eval items through formatting changes, flags no clean text, and resumes.

The eval set is GSM8K-style: grade-school word problems generated from
templates (varied names, numbers, objects, sentence shapes; 20-60 words). The
corpus is real text from this Python (pydoc topics and standard library
sources) cut into documents; some documents get a test question planted in
them with a different surrounding format each (markdown, "Q:" prefixes, hard
line wraps, doubled spaces, curly quotes, bullets, capitals, full-width digits).
"""

import gzip
import json
import random
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.ids import content_id
from tootsie.datakit.ngrams import normalized_words
from tootsie.datakit.stats import STATS_FILE
from tootsie.errors import TootsieError

NAMES = {
    "she": (
        "Natalia Weng Betty Julie Mia Tina Rosa Carla Aisha Priya Leah Nadia Olivia Greta Ines Yuki Fatima Zoe "
        "Hannah Lucia"
    ).split(),
    "he": (
        "James Mark Tobias Ravi Omar Kenji Diego Lucas Samuel Felix Andre Marco Ethan Noah Ivan Pedro Hugo Malik "
        "Arjun Leo"
    ).split(),
}
PRONOUNS = {"she": {"he": "she", "his": "her", "him": "her"}, "he": {"he": "he", "his": "his", "him": "him"}}
OBJECTS = (
    "clips marbles stickers pencils cupcakes seashells stamps baseball cards apples oranges cookies books crayons "
    "buttons postcards tulips"
).split()
MONTHS = "January February March April May June July August September October November December".split()
TEMPLATES = [
    (
        "{name} sold {n1} {obj} to {his} friends in {month}, and then {he} sold half as many {obj} in {month2}. "
        "How many {obj} did {name} sell altogether in {month} and {month2}?"
    ),
    (
        "{name} earns ${n1} an hour for {job}. Yesterday, {he} did {n2} minutes of {job} for a neighbor. "
        "How much money did {name} earn for that work?"
    ),
    (
        "{name} is saving money for a new {thing} which costs ${n3}. {He} has only half of the money {he} needs. "
        "{His} parents give {him} ${n1}, and {his} grandparents give twice as much. "
        "How much more money does {name} need?"
    ),
    (
        "{name} is reading a {n3}-page book about {topic}. "
        "Yesterday {he} read {n1} pages, and today {he} read twice as many pages as yesterday. "
        "If {he} wants to read half of the remaining pages tomorrow, how many pages should {he} read?"
    ),
    (
        "A {store} near {name}'s school has {n1} boxes of {obj}, and each box holds {n2} {obj}. "
        "{name} buys {n4} boxes and gives {n5} {obj} to {name2}. How many {obj} does {name} keep?"
    ),
    (
        "{name} wants to plant {n1} rows of {plant} in the garden. "
        "Each row needs {n2} seeds, and one packet costs ${n4} and contains {n5} seeds. "
        "How many dollars will {name} spend on packets of seeds?"
    ),
    (
        "There are {n3} students in {name}'s {grade} class. "
        "{frac} of them play {sport} after school, and {n1} of the others join the {club} club. "
        "How many students in the class do neither of these activities?"
    ),
    (
        "Every {day}, {name} drives {n1} miles to the {place} and then drives back home. "
        "{His} car can go {n2} miles on one gallon of gas, which costs ${n4}. "
        "How much does {name} spend on gas in {n5} weeks?"
    ),
    (
        "At the {event}, {name} bought {n4} {food} for ${n5} each and {n2} bottles of juice for ${n6} each. "
        "{He} paid with a ${bill} bill. How much change did the cashier give back to {name}?"
    ),
    (
        "{name} and {name2} collect {obj} for a class project about {topic}. "
        "On {day}, {name} found {n1} {obj} and {name2} found {n2} more than {name} did. They need {n3} {obj} in all. "
        "How many more do they need?"
    ),
    (
        "A baker in {city} bakes {n3} loaves of {bread} each morning. "
        "{name} helps {him2} sell {n1} loaves before noon and {frac} of the remaining loaves in the afternoon. "
        "How many loaves are left when the shop closes?"
    ),
    (
        "If {name} runs {n2} laps around a {n6}00-meter track every {day} for {n4} weeks, "
        "how many meters does {he} run in total? After that, {he} rests for {n5} days before the {event} begins."
    ),
]
POOLS = {
    "job": "babysitting|dog walking|tutoring|mowing lawns|washing cars|raking leaves".split("|"),
    "thing": "wallet|bicycle|guitar|backpack|telescope|skateboard|tablet".split("|"),
    "topic": "volcanoes|ancient Egypt|space travel|dinosaurs|ocean life|the rainforest|bridges".split("|"),
    "store": "toy store|bookshop|corner market|craft store|bakery".split("|"),
    "plant": "carrots|sunflowers|tomatoes|lettuce|beans|pumpkins".split("|"),
    "grade": "third-grade|fourth-grade|fifth-grade|sixth-grade|art|music".split("|"),
    "frac": "One half|One third|One quarter|Two thirds|Three fifths".split("|"),
    "sport": "soccer|basketball|chess|tennis|volleyball|baseball".split("|"),
    "club": "drama|robotics|science|garden|debate|photography".split("|"),
    "day": "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday".split("|"),
    "place": "library|office|beach|farm market|swimming pool|airport".split("|"),
    "event": "county fair|school picnic|book sale|street festival|science fair|concert".split("|"),
    "food": "hot dogs|sandwiches|tacos|slices of pizza|pretzels|burritos".split("|"),
    "city": "Denver|Lisbon|Osaka|Nairobi|Toronto|Lima|Krakow".split("|"),
    "bread": "rye bread|sourdough|whole wheat bread|cornbread|baguettes".split("|"),
}


def gsm8k_style_items(count: int, seed: int) -> list[dict[str, str]]:
    """`count` distinct word problems as `{"id", "question", "answer"}` records (answers are placeholders)."""
    rng, items, seen = random.Random(seed), [], set()
    while len(items) < count:
        gender, template = rng.choice(["she", "he"]), rng.choice(TEMPLATES)
        name, name2 = rng.sample(NAMES[gender], 2)
        month, month2 = rng.sample(MONTHS, 2)
        pronouns = PRONOUNS[gender]
        slots = {key: rng.choice(pool) for key, pool in POOLS.items()}
        slots |= {f"n{i}": rng.randint(3, 90) * (10 if i == 3 else 1) for i in range(1, 7)}
        slots |= {
            "name": name,
            "name2": name2,
            "month": month,
            "month2": month2,
            "obj": rng.choice(OBJECTS),
            "bill": rng.choice([20, 50, 100]),
        }
        slots |= (
            pronouns
            | {key.capitalize(): value.capitalize() for key, value in pronouns.items()}
            | {"him2": PRONOUNS[rng.choice(["she", "he"])]["him"]}
        )
        question = template.format(**slots)
        if question not in seen:
            seen.add(question)
            items.append({"id": f"gsm-{len(items):04d}", "question": question, "answer": f"#### {rng.randint(1, 500)}"})
    return items


def _real_texts() -> Iterator[str]:
    from pydoc_data.topics import topics

    yield from (topics[name] for name in sorted(topics))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        yield path.read_text(encoding="utf-8", errors="replace")


def stdlib_chunks(count: int, chars: int = 1500) -> list[str]:
    """`count` clean documents of about `chars` characters from pydoc topics and standard library sources."""
    chunks: list[str] = []
    for text in _real_texts():
        current = ""
        for line in text.splitlines(keepends=True):
            current += line
            if len(current) >= chars:
                chunks.append(current)
                current = ""
            if len(chunks) == count:
                return chunks
    raise ValueError(f"only {len(chunks)} chunks of {chars} characters available, {count} asked")


def _wrap(text: str, every: int) -> str:
    words = text.split(" ")
    return "\n".join(" ".join(words[i : i + every]) for i in range(0, len(words), every))


STYLES = [
    lambda q, k: f"## Problem {k}\n\n{q}\n\n",
    lambda q, k: f"Q: {q}\nA: Let's think step by step.",
    lambda q, k: f"Question: {_wrap(q, 7)}\nAnswer:",
    lambda q, k: f"**Question:** {q.replace(' ', '  ')}",
    lambda q, k: "> " + q.replace("'", "\u2019").replace(". ", ".\u201d \u201c"),
    lambda q, k: "\n".join(f"- {s.strip()}" for s in q.replace("? ", "?|").replace(". ", ".|").split("|")),
    lambda q, k: q.upper(),
    lambda q, k: f"<p>{q.translate(str.maketrans('0123456789', '０１２３４５６７８９'))}</p>",
    lambda q, k: f"{k}.\t{_wrap(q, 5).replace(chr(10), chr(10) + '   ')}\n#### answer",
]


def plant(question: str, document: str, style: int, rng: random.Random) -> str:
    """`document` with `question`, formatted by STYLES[style], inserted at a random line boundary."""
    lines = document.splitlines(keepends=True)
    at = rng.randrange(len(lines) + 1)
    return "".join(lines[:at]) + "\n" + STYLES[style % len(STYLES)](question, style) + "\n" + "".join(lines[at:])


def write_documents(directory: Path, texts: list[str], shards: int) -> None:
    """A document directory of `shards` Parquet shards."""
    directory.mkdir(parents=True)
    per_shard = -(-len(texts) // shards)
    for shard in range(shards):
        part = texts[shard * per_shard : (shard + 1) * per_shard]
        table = {
            "id": [content_id(t) for t in part],
            "text": part,
            "source_id": [f"doc{shard}-{i}" for i in range(len(part))],
        }
        pq.write_table(pa.table(table), directory / f"part-{shard:05d}.parquet")


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _attributes(out: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(path) for path in sorted(out.glob("part-*.parquet")))


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    """3,000 clean documents and 300 with a planted eval question, scanned once with two workers."""
    root = tmp_path_factory.mktemp("decon")
    items, rng = gsm8k_style_items(400, seed=0), random.Random(1)
    clean, hosts = stdlib_chunks(3000), stdlib_chunks(3300)[3000:]
    planted = {plant(items[k]["question"], hosts[k], k, rng): items[k]["id"] for k in range(300)}
    texts = clean + list(planted)
    random.Random(2).shuffle(texts)
    write_documents(root / "docs", texts, shards=4)
    eval_file = write_jsonl(root / "gsm_test.jsonl", items)
    config = DecontaminateConfig(
        input=str(root / "docs"), eval_files=(str(eval_file),), engine=EngineConfig(workers=2, progress=False)
    )
    stats = decontaminate(config, str(root / "out"))
    attributes = _attributes(root / "out").to_pylist()
    text_of = {content_id(t): t for t in texts}
    return {
        "root": root,
        "config": config,
        "stats": stats,
        "planted": planted,
        "rows": [(text_of[row["id"]], row) for row in attributes],
    }


def test_planted_items_are_found_through_formatting_changes(planted_run) -> None:
    planted, rows = planted_run["planted"], planted_run["rows"]
    found = [
        row["contaminated"] and row["matched_eval_ids"][0] == planted[text] for text, row in rows if text in planted
    ]
    recall = sum(found) / len(found)
    assert len(found) == 300 and recall >= 0.99, f"{recall=}"
    assert all(row["max_overlap"] == 1.0 for text, row in rows if text in planted)


def test_clean_documents_are_not_flagged(planted_run) -> None:
    clean = [row for text, row in planted_run["rows"] if text not in planted_run["planted"]]
    false_positive_rate = sum(row["contaminated"] for row in clean) / len(clean)
    assert len(clean) == 3000 and false_positive_rate <= 0.001, f"{false_positive_rate=}"
    assert all(not row["matched_eval_ids"] for row in clean if not row["contaminated"])


def test_stats_and_report(planted_run) -> None:
    out = planted_run["root"] / "out"
    stats = planted_run["stats"]
    assert set(stats) == {"docs", "contaminated", "eval_items_matched", "total", "kept", "dropped"}
    assert stats["docs"] == 3300 and stats["contaminated"] >= 297
    assert (stats["total"], stats["kept"], stats["dropped"]) == (
        3300,
        3300 - stats["contaminated"],
        {"contaminated": stats["contaminated"]},
    )
    assert json.loads((out / STATS_FILE).read_text()) == stats
    report = json.loads((out / "report.json").read_text())
    assert {key: report[key] for key in ("docs", "contaminated", "eval_items_matched")} == {
        key: stats[key] for key in ("docs", "contaminated", "eval_items_matched")
    }
    counts = {entry["eval_id"]: entry["docs"] for entry in report["matched"]}
    assert set(planted_run["planted"].values()) <= set(counts) and len(counts) == stats["eval_items_matched"]
    assert sum(report["docs_by_max_overlap"].values()) == 3300 and report["docs_by_max_overlap"]["1.0"] == 300


def test_attributes_are_co_partitioned_with_the_documents(planted_run) -> None:
    root = planted_run["root"]
    for document_shard in sorted((root / "docs").glob("part-*.parquet")):
        attributes = pq.read_table(root / "out" / document_shard.name)
        assert attributes.column_names == ["id", "contaminated", "max_overlap", "matched_eval_ids"]
        assert attributes.column("id").to_pylist() == pq.read_table(document_shard).column("id").to_pylist()


def test_rerun_skips_finished_shards_and_redoes_a_missing_one(planted_run) -> None:
    out, config = planted_run["root"] / "out", planted_run["config"]
    before = {path.name: path.stat().st_mtime_ns for path in out.glob("part-*.parquet")}
    (out / ".decontaminate" / "done" / "part-00002.json").unlink()
    assert decontaminate(config, str(out)) == planted_run["stats"]
    after = {path.name: path.stat().st_mtime_ns for path in out.glob("part-*.parquet")}
    assert [name for name in sorted(before) if before[name] != after[name]] == ["part-00002.parquet"]


def test_normalization_ignores_formatting() -> None:
    expected = ["q", "natalia", "s", "cookies", "cost", "1", "200"]
    assert (
        normalized_words("**Q:** Natalia\u2019s  \u201ccookies\u201d\ncost $1,200.")
        == normalized_words("q natalia's cookies cost 1 200")
        == expected
    )
    question = "Natalia's class has 48 pupils; how many pupils are in 2 classes?"
    words = normalized_words(question)
    for style in range(len(STYLES)):
        formatted = normalized_words(STYLES[style](question, style))
        assert any(formatted[i : i + len(words)] == words for i in range(len(formatted))), STYLES[style](
            question, style
        )


def _scan(
    tmp_path: Path, documents: list[str], records: list[dict[str, object]], **overrides: object
) -> list[dict[str, object]]:
    write_documents(tmp_path / "docs", documents, shards=1)
    eval_file = write_jsonl(tmp_path / "eval.jsonl", records)
    config = DecontaminateConfig(
        input=str(tmp_path / "docs"),
        eval_files=(str(eval_file),),
        engine=EngineConfig(workers=1, progress=False),
        **overrides,
    )
    decontaminate(config, str(tmp_path / "out"))
    return _attributes(tmp_path / "out").to_pylist()


def test_short_items_match_as_whole_phrases(tmp_path) -> None:
    records = [{"question": "What is seven times eight?"}, {"question": gsm8k_style_items(1, seed=5)[0]["question"]}]
    documents = ["Quiz time. WHAT is seven  times\neight? Think.", "what is seven times nine", "nothing to see here"]
    rows = _scan(tmp_path, documents, records)
    assert [row["matched_eval_ids"] for row in rows] == [["eval:1"], [], []]
    assert [row["max_overlap"] for row in rows] == [1.0, 0.0, 0.0]


def test_near_copies_pass_the_threshold_and_fragments_do_not(tmp_path) -> None:
    question = gsm8k_style_items(1, seed=3)[0]["question"]
    words = question.split(" ")
    middle = len(words) // 2
    edited = " ".join(words[:middle] + ["banana"] + words[middle + 1 :])
    fragment = " ".join(words[:14])
    rows = _scan(
        tmp_path, [f"Intro. {edited} Outro.", f"Intro. {fragment} Outro."], [{"id": "q1", "question": question}]
    )
    assert rows[0]["contaminated"] and 0.5 <= rows[0]["max_overlap"] < 1.0
    assert not rows[1]["contaminated"] and 0.0 < rows[1]["max_overlap"] < 0.5


def test_several_eval_fields_each_add_ngrams(tmp_path) -> None:
    record = {
        "id": "q",
        "question": "Tom has three red apples and five green pears in a basket today",
        "choices": "apples pears plums",
    }
    document = ["the choices were: apples, pears, plums!"]
    rows = _scan(tmp_path, document, [record], eval_field=("question", "choices"), threshold=0.6)
    assert rows[0]["matched_eval_ids"] == [] and rows[0]["max_overlap"] == 0.5
    assert _scan(tmp_path / "b", document, [record], eval_field=("question", "choices"))[0]["matched_eval_ids"] == ["q"]


def test_eval_set_is_gsm8k_like() -> None:
    items = gsm8k_style_items(1319, seed=0)
    lengths = [len(item["question"].split()) for item in items]
    assert len({item["question"] for item in items}) == 1319 and 20 <= min(lengths) and max(lengths) <= 60


def test_module_docstring_example(tmp_path) -> None:
    question = (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did she sell?"
    )
    document = (
        "## Practice\n\n**Q:** NATALIA sold clips to 48 of her\n"
        "friends in April, and then she sold half as many clips in May. How many clips did she sell?"
    )
    rows = _scan(tmp_path, [document, "unrelated text"], [{"id": "gsm:1", "question": question}])
    assert [(row["contaminated"], row["max_overlap"], row["matched_eval_ids"]) for row in rows] == [
        (True, 1.0, ["gsm:1"]),
        (False, 0.0, []),
    ]


def test_gzipped_jsonl_and_parquet_eval_files(tmp_path) -> None:
    questions = [item["question"] for item in gsm8k_style_items(2, seed=7)]
    with gzip.open(tmp_path / "first.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"question": questions[0]}) + "\n")
    pq.write_table(pa.table({"question": [questions[1]], "id": ["p-1"]}), tmp_path / "second.parquet")
    write_documents(tmp_path / "docs", [f"x {questions[0]} y", f"x {questions[1]} y"], shards=1)
    config = DecontaminateConfig(
        input=str(tmp_path / "docs"),
        eval_files=(str(tmp_path / "first.jsonl.gz"), str(tmp_path / "second.parquet")),
        engine=EngineConfig(workers=1, progress=False),
    )
    assert decontaminate(config, str(tmp_path / "out")) == {
        "docs": 2,
        "contaminated": 2,
        "eval_items_matched": 2,
        "total": 2,
        "kept": 0,
        "dropped": {"contaminated": 2},
    }
    assert [row["matched_eval_ids"] for row in _attributes(tmp_path / "out").to_pylist()] == [["first:1"], ["p-1"]]


def test_missing_eval_field_names_the_file_and_field(tmp_path) -> None:
    with pytest.raises(TootsieError, match=r"eval\.jsonl, record 2: no text field 'question'.*--eval-field"):
        _scan(tmp_path, ["some text"], [{"question": "a b c"}, {"prompt": "d e f"}])


def test_missing_eval_file_is_a_clear_error(tmp_path) -> None:
    write_documents(tmp_path / "docs", ["some text"], shards=1)
    config = DecontaminateConfig(
        input=str(tmp_path / "docs"), eval_files=(str(tmp_path / "nope.jsonl"),), engine=EngineConfig(workers=1)
    )
    with pytest.raises(TootsieError, match="eval file not found: .*nope.jsonl"):
        decontaminate(config, str(tmp_path / "out"))


def test_output_of_another_eval_set_is_not_resumed(tmp_path) -> None:
    _scan(tmp_path, ["some text"], [{"question": "a b c"}])
    write_jsonl(tmp_path / "eval.jsonl", [{"question": "d e f"}])
    config = DecontaminateConfig(
        input=str(tmp_path / "docs"),
        eval_files=(str(tmp_path / "eval.jsonl"),),
        engine=EngineConfig(workers=1, progress=False),
    )
    with pytest.raises(TootsieError, match="other eval items or settings"):
        decontaminate(config, str(tmp_path / "out"))


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"threshold": 0.0}, "threshold"),
        ({"ngram": 0}, "ngram"),
        ({"eval_files": ()}, "eval_files"),
        ({"eval_field": ""}, "eval_field"),
    ],
)
def test_config_validation_names_the_field(override: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DecontaminateConfig(**({"input": "docs", "eval_files": ("e.jsonl",)} | override))
