"""tootsie: a fully-open LLM training lab.

Raw text goes through `datakit` (normalize, filter, dedup, tokenize) into a token
cache; `data` turns caches into a stateless `batch(step)`; `models` and `train`
train JAX decoders on it; `eval` and `monitor` measure and explain the run; the
`executor` versions every step by hashing its config and inputs, so any output
can be traced back to exactly what produced it.
"""

__version__ = "0.1.0"
