"""Run model-written Python (HumanEval) in a sandbox, and score pass@1 with it.

lm-eval's HumanEval scores through Hugging Face `evaluate`'s `code_eval`,
which is fetched from the Hub and runs the code in-process threads. tootsie
replaces that metric: each program (prompt + completion + the task's tests)
runs in its own subprocess of this Python that sees only the standard library
(`stdlib_source.STDLIB_ONLY_FLAGS`: no site-packages, no user site, no script
directory), with the fixed environment `stdlib_source.STDLIB_ENV` (hash seed
0, UTC, UTF-8) and nothing of the caller's, in a fresh temporary directory,
in a new session killed as a group at the timeout, under
hard rlimits (CPU seconds, address space, file size, no new processes) and inside
an unprivileged user + network namespace (`unshare -rn`), so it has no network
interface but loopback. Where the kernel refuses the namespace the sandbox is
unavailable and the suite refuses HumanEval with that reason rather than run
code with network access.

Whether a program passes depends on the interpreter (its version, build and
standard library) and on nothing else on the machine: not on the packages of
the environment tootsie runs in, nor on the caller's environment variables.
A step that scores code names that interpreter in its config
(`stdlib_source.PythonIdentity`, as microanneal's `BranchTasksConfig.python`
does), so another Python gets another output path.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache

from tootsie.corpora.stdlib_source import STDLIB_ENV, STDLIB_ONLY_FLAGS
from tootsie.errors import TootsieError

TIMEOUT_S = 10.0
"""Wall-clock seconds per program (HumanEval's reference harness uses 3 s per test; our CPUs are shared)."""
CPU_S = 10
MEMORY_BYTES = 1 << 30
FILE_BYTES = 1 << 20


PRELUDE = f"""
import resource, sys
for limit, value in ((resource.RLIMIT_CPU, {CPU_S}), (resource.RLIMIT_AS, {MEMORY_BYTES}),
                     (resource.RLIMIT_FSIZE, {FILE_BYTES}), (resource.RLIMIT_NPROC, 0)):
    resource.setrlimit(limit, (value, value))
source = sys.argv[1]
del sys.argv[1:]
exec(compile(source, "<candidate>", "exec"), {{"__name__": "__main__"}})
"""
"""Run by the sandboxed interpreter before the program (passed as argv[1]): hard rlimits it cannot raise again.

Set in the child rather than in a `preexec_fn`, which would fork the JAX-threaded parent."""


def _isolation() -> list[str]:
    unshare = shutil.which("unshare")
    return [unshare, "--user", "--map-root-user", "--net", "--"] if unshare else []


@cache
def sandbox_unavailable() -> str | None:
    """Why code cannot run sandboxed here (no `unshare`, or the kernel refuses user namespaces), or None."""
    prefix = _isolation()
    if not prefix:
        return "the `unshare` command (util-linux) is not installed, so code would run with network access"
    try:
        done = subprocess.run([*prefix, "true"], capture_output=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"`unshare --user --net` failed ({error}), so code would run with network access"
    if done.returncode != 0:
        return (
            f"`unshare --user --net` failed ({done.stderr.decode(errors='replace').strip()}):"
            " unprivileged user namespaces are off, so code would run with network access"
        )
    return None


def run_program(source: str) -> bool:
    """Whether `source` runs to completion (exit 0) in the sandbox within the time limit."""
    reason = sandbox_unavailable()
    if reason is not None:
        raise TootsieError(f"refusing to execute model-written code: {reason}")
    with tempfile.TemporaryDirectory(prefix="tootsie-sandbox-") as work:
        with subprocess.Popen(
            [*_isolation(), sys.executable, *STDLIB_ONLY_FLAGS, "-c", PRELUDE, source],
            cwd=work,
            env=dict(STDLIB_ENV),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        ) as process:
            try:
                return process.wait(timeout=TIMEOUT_S) == 0
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait(timeout=TIMEOUT_S)
                return False


def pass_at_1(references: list[str], predictions: list[list[str]], k: list[int] | None = None) -> float:
    """lm-eval metric: the share of programs (first prediction + its test code) that pass, run sandboxed."""
    if not references:
        return 0.0
    passed = [run_program(f"{candidates[0]}\n\n{test}\n") for test, candidates in zip(references, predictions)]
    return sum(passed) / len(passed)


def build_predictions(responses: list[list[str]], docs: list[dict[str, str]]) -> list[list[str]]:
    """lm-eval filter: each completion appended to its prompt (the function's signature and docstring)."""
    return [[doc["prompt"] + response for response in group] for group, doc in zip(responses, docs)]
