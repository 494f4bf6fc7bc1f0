"""Evaluation results of a run's phases, for the model card.

Two sources, both recorded by earlier steps rather than recomputed here:
- bits-per-byte steps (`EvalBPBConfig`) under the same executor prefix whose
  checkpoints include a phase of the run: every label of their `bpb.json`
  (`final`, `final_ema`, `init`, ...) with the phase it scored;
- the in-loop evaluation of each phase (`eval/bpb/<domain>` metrics): the last
  logged values.
"""

from tootsie.eval.bpb_step import BPB_FILE
from tootsie.jsonfile import read_json
from tootsie.release.run_history import RunHistory
from tootsie.release.step_info import STEP_KEY, find_steps

IN_LOOP_PREFIX = "eval/bpb/"


def bpb_step_results(history: RunHistory) -> list[dict[str, object]]:
    """Rows `{label, phase, weights, step, bpb: {domain: value}}` from BPB steps that scored this run's checkpoints."""
    phase_of = {phase.step.id: phase.name for phase in history.phases if phase.step is not None}
    if not phase_of:
        return []
    rows = []
    for step in find_steps(history.phases[-1].step.prefix):
        if step.type != "EvalBPBConfig":
            continue
        checkpoints = step.config.get("checkpoints", {})
        scored = {
            label: phase_of.get(ref[STEP_KEY]) if isinstance(ref, dict) else None for label, ref in checkpoints.items()
        }
        results = read_json(step.directory / BPB_FILE)
        if results is None or not any(scored.values()):
            continue
        for label, phase in scored.items():
            for suffix, weights in (("", "model"), ("_ema", "ema")):
                if f"{label}{suffix}" in results:
                    rows.append(
                        {
                            "label": f"{label}{suffix}",
                            "phase": phase or "initialization",
                            "weights": weights,
                            "step": step.id,
                            "bpb": results[f"{label}{suffix}"],
                        }
                    )
    order = {name: index for index, name in enumerate(["initialization", *(p.name for p in history.phases)])}
    return sorted(rows, key=lambda r: (order.get(str(r["phase"]), len(order)), r["weights"] == "ema", str(r["label"])))


def in_loop_results(history: RunHistory) -> list[dict[str, object]]:
    """Rows `{phase, step, bpb: {domain: value}}`: the last in-loop evaluation logged in each phase."""
    rows = []
    for phase in history.phases:
        evaluated = [r for r in phase.metrics() if any(str(k).startswith(IN_LOOP_PREFIX) for k in r)]
        if evaluated:
            last = evaluated[-1]
            rows.append(
                {
                    "phase": phase.name,
                    "step": last["step"],
                    "bpb": {k[len(IN_LOOP_PREFIX) :]: v for k, v in last.items() if k.startswith(IN_LOOP_PREFIX)},
                }
            )
    return rows
