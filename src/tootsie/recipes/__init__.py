"""Recipes: the Marin 8B and 32B runs as phase-by-phase plans that build real training steps.

A `Recipe` is a tree of `Phase`s over global steps: each phase is one training
step (a `TrainConfig`) warm-started from its parent's last checkpoint, with its
own mixture stages, batch sizes, schedule, optimizer and stability settings.
Every number comes from the seed tables in `marin.tables_8b` and
`marin.tables_32b` (each with its source); `build` turns a recipe into executor
steps at a `Scale` (FULL is the runs as they were), `plan` into the JSON plan
that `tootsie run --dry-run --json` prints, and `components` maps mixture
component names to the token caches the user supplies.

Layout: the recipe machinery sits at the top (`recipe`: Phase, Recipe;
`scale`; `mix_table`: seed mixture tables; `components`; `build`; `plan`;
`experiment_file`; `instruct`: an SFT phase on top of a released step), and
the groups are subpackages: `marin` (every number of the 8B, 32B and 8B
Instruct runs, each with its source), `tiny` (the CPU-sized scale and its
local stand-in data), `microanneal` (short anneals per candidate source,
ranked against a control) and `cases` (the retrospectives' case studies at
toy scale).
"""
