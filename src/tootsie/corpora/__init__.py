"""Demo corpora from the running Python (stdlib code, docstrings, pydoc pages as WARC): real text, no network.

The demos, recipes, tests and benchmarks build their inputs here; the datakit stages
themselves never import this package."""
