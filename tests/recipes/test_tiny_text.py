"""The tiny recipes' generated text is a function of the rng alone, never of the interpreter's hash seed."""

import subprocess
import sys

PROGRAM = (
    "import hashlib, numpy as np\n"
    "from tootsie.recipes.tiny.text import instruction_document, math_document\n"
    "rng = np.random.default_rng(0)\n"
    "text = [instruction_document(rng) + math_document(rng) for _ in range(60)]\n"
    "print(hashlib.sha256(repr(text).encode()).hexdigest())\n"
)


def test_documents_are_the_same_under_every_hash_seed() -> None:
    digests = {
        subprocess.run(
            [sys.executable, "-c", PROGRAM],
            env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(digests) == 1
