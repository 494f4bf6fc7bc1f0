"""Recipes: the Marin 8B and 32B runs as phase-by-phase plans that build real training steps.

A `Recipe` is a tree of `Phase`s over global steps: each phase is one training
step (a `TrainConfig`) warm-started from its parent's last checkpoint, with its
own mixture stages, batch sizes, schedule, optimizer and stability settings.
Every number comes from the seed tables in `marin_8b_tables` and
`marin_32b_tables` (each with its source); `build` turns a recipe into executor
steps at a `Scale` (FULL is the runs as they were), `plan` into the JSON plan
that `tootsie run --dry-run --json` prints, and `components` maps mixture
component names to the token caches the user supplies.

Modules: `mix_table` (seed mixture tables), `recipe` (Phase, Recipe), `scale`,
`components`, `build`, `plan`, and the two tables modules; `tiny`, `tiny_data`
and `tiny_text` (the CPU-sized scale and its local data); `instruct`,
`marin_8b_instruct_tables` and `tiny_chat` (the Marin 8B Instruct SFT on top
of the 8B recipe, and its local conversations); `microanneal`,
`microanneal_rank`, `microanneal_tasks` and `microanneal_scales` (short
anneals per candidate source, ranked against a control); `case_*` (the
retrospectives' case studies at toy scale).
"""
