"""The retrospectives' failures, reproduced at toy scale: each one's cause in the metrics, and its fix at work.

One module per phenomenon (`PHENOMENA` names them; docs/phenomena.md has
each one's quote, figure, numbers and verdict):

- `qk_norm_spikes`: loss spikes over an LR grid that QK-norm removes (32B, Phases 1-3);
- `z_loss_cooldown`: lm_head norm and log Z that grow in a long low-LR tail without z-loss;
- `muon_divergence`: Muon against AdamW across LRs, and where each diverges;
- `necromancy`: restarts of a spiking run (rebuilt state, NAdamW, Muon, the QK-norm switch) and their relapses;
- `format_contamination`: test items trained on in one format, evaluated in two;
- `embedding_norm`: the embedding's norm under AdamW, with and without decay on it.

    tootsie phenomena list
    tootsie phenomena run qk-norm-spikes --scale tiny --out /tmp/phenomena --json
    tootsie run experiments/phenomena/qk_norm_spikes.py --prefix /tmp/phenomena
"""

from tootsie.recipes.phenomena.registry import DEFAULT_SCALE, PHENOMENA, SCALES, Phenomenon, phenomenon

__all__ = ["DEFAULT_SCALE", "PHENOMENA", "SCALES", "Phenomenon", "phenomenon"]
