"""eval: bits-per-byte on held-out text and suites of domains, lm-eval tasks, preference and chat evaluations.

It also holds `training.run_training`, the one training entry point, because a
run's config can ask for in-loop evaluation and evaluation sits above `train`.
"""
