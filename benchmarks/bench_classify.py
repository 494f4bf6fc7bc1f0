"""Quality classifier: train time, held-out accuracy and classify docs/s, tootsie against fastText.

Training pair (the Must-show test's): the standard library's docstrings
(positive) against the license texts of site-packages (negative), balanced,
held out by tootsie's seeded id split (`heldout_fraction`, seed 0); fastText
trains and is scored on exactly the same two halves.

Classify corpus: `--docs` documents of about 4 KB cut from the standard library
(`benchmarks/corpus.py`), scored in batches of 1,024 (`classify`'s batch size):

- `tootsie`: `HashedLinearModel.scores(batch)` (Arrow tokenization, xxh3 of
  each distinct token, numpy bincount), one thread;
- `fasttext`: `model.predict(batch, k=1)`, fastText's batched predict (the
  texts' newlines replaced by spaces, as fastText requires), `thread=1` when
  training; run in the Python given by `--fasttext-python` (a venv with
  `fasttext-numpy2-wheel`), timed inside that process (start-up excluded);
- `stage`: the whole `classify` stage (Parquet in, attribute Parquet out,
  `--workers` processes, their start-up included).

Each repeat runs every implementation once, the order alternating, so a busy
phase of a shared machine hits all alike; reported: median [min-max] over
repeats of docs/s in wall seconds and in CPU seconds of the scoring process
(`*_cpu`, steadier on a shared machine), tootsie / fastText per repeat
(`ratio`, `ratio_cpu`), and the load average before and after. Prints a table
and one JSON line.

    python benchmarks/bench_classify.py --docs 5000 --repeats 5 --fasttext-python /tmp/ftvenv/bin/python
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH = 1024
BUCKET_BITS = 20


def _fasttext_worker(request: dict) -> dict:
    """In the fastText venv: train on the train file, score the held-out file and time batched predict."""
    import fasttext

    started = time.perf_counter()
    model = fasttext.train_supervised(
        input=request["train_file"], wordNgrams=2, bucket=1 << BUCKET_BITS, thread=1, verbose=0, seed=0
    )
    train_seconds = time.perf_counter() - started
    heldout = [line.split(" ", 1) for line in Path(request["heldout_file"]).read_text().splitlines()]
    labels, _ = model.predict([text for _, text in heldout], k=1)
    accuracy = sum(label[0] == gold for label, (gold, _) in zip(labels, heldout, strict=True)) / len(heldout)
    texts = Path(request["classify_file"]).read_text().splitlines()
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), BATCH):
        model.predict(texts[start : start + BATCH], k=1)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"train_seconds": train_seconds, "accuracy": accuracy, "rates": [len(texts) / wall, len(texts) / cpu]}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main() -> None:
    """Run the benchmark and print a table and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000, help="documents to classify")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the classify stage")
    parser.add_argument("--fasttext-python", default=None, help="python of a venv with fasttext-numpy2-wheel")
    parser.add_argument("--fasttext-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fasttext_worker:
        print(json.dumps(_fasttext_worker(json.loads(args.fasttext_worker))))
        return

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.corpus import documents
    from tests.datakit.real_corpora import license_texts, stdlib_docstrings, write_documents
    from tootsie.datakit.classifier_model import load_classifier
    from tootsie.datakit.classify import ClassifyConfig, classify
    from tootsie.datakit.engine import EngineConfig
    from tootsie.datakit.ids import content_id
    from tootsie.datakit.train_classifier import TrainClassifierConfig, heldout_mask, train_classifier

    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-classify-"))
    licenses = license_texts()
    docstrings = stdlib_docstrings(len(licenses))
    config = TrainClassifierConfig(
        positive=(str(write_documents(docstrings, work / "pos")),),
        negative=(str(write_documents(licenses, work / "neg")),),
        heldout_fraction=0.3,
    )
    started = time.perf_counter()
    trained = train_classifier(config, str(work / "model"))
    tootsie_train = time.perf_counter() - started
    model = load_classifier(work / "model")
    texts = list(documents(args.docs * 4000 / 1e6))[: args.docs]
    write_documents(texts, work / "classify", per_shard=BATCH * 2)

    request: dict = {}
    if args.fasttext_python:
        labelled = [("__label__pos", t) for t in docstrings] + [("__label__neg", t) for t in licenses]
        held = heldout_mask([content_id(t) for _, t in labelled], config.heldout_fraction, config.seed)
        for name, keep in (("train_file", ~held), ("heldout_file", held)):
            lines = [f"{label} {_one_line(t)}" for (label, t), h in zip(labelled, keep, strict=True) if h]
            (work / f"{name}.txt").write_text("\n".join(lines) + "\n")
            request[name] = str(work / f"{name}.txt")
        (work / "classify.txt").write_text("\n".join(_one_line(t) for t in texts) + "\n")
        request["classify_file"] = str(work / "classify.txt")

    rates: dict[str, list[float]] = {"tootsie": [], "tootsie_cpu": [], "stage": []}
    fasttext: dict = {}
    for repeat in range(args.repeats):
        order = ["tootsie", "fasttext", "stage"] if repeat % 2 == 0 else ["stage", "fasttext", "tootsie"]
        for name in order:
            if name == "tootsie":
                started, cpu = time.perf_counter(), time.process_time()
                for start in range(0, len(texts), BATCH):
                    model.scores(texts[start : start + BATCH])
                rates[name].append(len(texts) / (time.perf_counter() - started))
                rates["tootsie_cpu"].append(len(texts) / (time.process_time() - cpu))
            elif name == "stage":
                engine = EngineConfig(workers=args.workers, progress=False)
                out = work / f"attr-{repeat}"
                stats = classify(
                    ClassifyConfig(input=str(work / "classify"), model=str(work / "model"), engine=engine), str(out)
                )
                rates[name].append(stats["docs_per_second"])
            elif args.fasttext_python:
                result = subprocess.run(
                    [args.fasttext_python, __file__, "--fasttext-worker", json.dumps(request)],
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=600,
                )
                fasttext = json.loads(result.stdout.strip().splitlines()[-1])
                rates.setdefault("fasttext", []).append(fasttext["rates"][0])
                rates.setdefault("fasttext_cpu", []).append(fasttext["rates"][1])
    if "fasttext" in rates:  # tootsie / fastText per repeat, wall and CPU
        rates["ratio"] = [t / f for t, f in zip(rates["tootsie"], rates["fasttext"], strict=True)]
        rates["ratio_cpu"] = [t / f for t, f in zip(rates["tootsie_cpu"], rates["fasttext_cpu"], strict=True)]
    summary = {name: {"median": statistics.median(r), "min": min(r), "max": max(r)} for name, r in rates.items() if r}
    report = {
        "docs": len(texts),
        "mean_doc_chars": sum(map(len, texts)) / len(texts),
        "repeats": args.repeats,
        "workers": args.workers,
        "classify_docs_per_second": summary,
        "tootsie_train": {
            "seconds": round(tootsie_train, 2),
            "fit_seconds": trained["train_seconds"],
            "train_docs": trained["train_docs"],
            "heldout_docs": trained["heldout_docs"],
            "accuracy": trained["accuracy"],
            "auc": trained["auc"],
        },
        "fasttext_train": {k: fasttext[k] for k in ("train_seconds", "accuracy")} if fasttext else None,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    for name, s in summary.items():
        print(f"{name:>13}: {s['median']:>10.2f} [{s['min']:.2f}-{s['max']:.2f}]")
    print(json.dumps(report))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
