"""RL with verifiable rewards: reward environments, rollouts through the KV-cache generator, and rollout shards.

`environments` scores a completion with a reward and the reason for it (right,
wrong, parse failure, truncated); `math_checker` and `code_env` are the
checkers, `arithmetic_task` the synthetic problems; `rollout` samples G
completions per prompt from the policy and recomputes their log-probs under the
policy and a frozen reference; `rollout_store` writes and validates one Parquet
shard per (iteration, seed). The update itself is train-layer math
(`tootsie.train.policy_loss`). See docs/rl.md.
"""
