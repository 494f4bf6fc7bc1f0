"""The executor: steps with content-addressed outputs, run once, skipped when done, explained in a plan.

An experiment is a list of `Step`s. A step is a name, a function and a frozen
dataclass config; a config may reference another step's output with a
`StepRef`, which makes that step an input. The executor hashes each step's
version (name + canonical config + its inputs' hashes) into its output path
`<prefix>/<name>-<hash>`, runs steps inputs-first, records status, lease and
metadata files in each output directory, and skips steps already SUCCESS.

Design note
-----------
Modelled on Marin's `ExecutorStep`, with its default inverted: Marin hashes
only the fields wrapped in `versioned()`, so a forgotten wrapper silently reuses
a stale output. Here every field is hashed unless declared `unhashed()` (worker
counts, logging, progress bars), so the failure mode of forgetting is a
recomputation, never a wrong result.

Worked example (two steps)::

    @dataclass(frozen=True)
    class CorpusConfig:
        n_docs: int = 100
        workers: int = unhashed(default=4)

    @dataclass(frozen=True)
    class TokenizeConfig:
        corpus: StepRef
        vocab_size: int = 512

    corpus = Step("demo/corpus", make_corpus, CorpusConfig())
    tokens = Step("demo/tokenize", tokenize, TokenizeConfig(corpus=corpus.ref("docs.jsonl")))
    STEPS = [tokens]          # demo/corpus is found through the StepRef

The version of `demo/corpus` is (canonical JSON, `workers` left out)::

    {"config": {"__type__": "CorpusConfig", "n_docs": 100}, "dependencies": {}, "name": "demo/corpus"}

its hash is the first 12 hex characters of its sha256, `5ade71dc2641`, so its
output is `out/demo/corpus-5ade71dc2641`. The version of `demo/tokenize` is::

    {"config": {"__type__": "TokenizeConfig",
                "corpus": {"__step__": "demo/corpus-5ade71dc2641", "subpath": "docs.jsonl"},
                "vocab_size": 512},
     "dependencies": {"demo/corpus-5ade71dc2641": "5ade71dc2641"}, "name": "demo/tokenize"}

giving `out/demo/tokenize-7f077f7467e5`; `tokenize` is called with
`corpus="<abs>/out/demo/corpus-5ade71dc2641/docs.jsonl"`. Setting
`workers=16` changes nothing. Setting `n_docs=200` gives `demo/corpus` the new
hash `3ca46efc75aa`, which appears inside `demo/tokenize`'s version, so it moves
too (`demo/tokenize-10b7c0507051`): both run again, and the old outputs stay
where they were. (tests/executor/test_hashing.py pins these values.)

The prefix may also be an fsspec URL (`s3://bucket/runs`): the executor's
files then live in object storage, leases become conditional writes, and step
functions still read and write local directories that the executor copies
down and uploads (see `staging`). Hashes do not depend on the prefix.

Modules: `step` (Step, StepRef), `hashing` (canonical form, hash),
`graph` (discovery, order, output paths), `lease` (locks with heartbeat),
`status` (status files, reported status), `metadata` (`.executor_info.json`),
`steplog` (`.executor.log`), `plan` (what a run would do, and why), `runner`
(run_experiment), `report` (RunReport), `experiment` (load_experiment),
`storage` (local paths and fsspec URLs), `remote_lease` (leases in object
storage), `staging` (local copies of remote inputs and outputs), `manifest`
(`.executor_manifest.json`: path, size and sha256 of every output file, written
before SUCCESS), `portable` (paths a step records, named relative to the
prefix), `aside` (a damaged or stale output moved aside before its rerun),
`verify` (rerun finished steps into scratch and compare manifests).
"""

from tootsie.executor.experiment import load_experiment
from tootsie.executor.graph import Graph, Node, build_graph, output_path, step_hash
from tootsie.executor.hashing import canonical, canonical_json, hash_json, version
from tootsie.executor.lease import FileLease, Lease, LeaseRecord, LeaseSettings
from tootsie.executor.report import RunReport, StepReport, failure_summary
from tootsie.executor.runner import experiment_status, run_experiment
from tootsie.executor.status import Status
from tootsie.executor.step import Resources, Step, StepRef, output_of

__all__ = [
    "FileLease",
    "Graph",
    "Lease",
    "LeaseRecord",
    "LeaseSettings",
    "Node",
    "Resources",
    "RunReport",
    "Status",
    "Step",
    "StepRef",
    "StepReport",
    "build_graph",
    "canonical",
    "canonical_json",
    "experiment_status",
    "failure_summary",
    "hash_json",
    "load_experiment",
    "output_of",
    "output_path",
    "run_experiment",
    "step_hash",
    "version",
]
