"""monitor: the run-log library the trainer writes through.

The metrics log (`metrics.jsonl`), trackers (JSONL, W&B, TensorBoard), throughput
and MFU, spike detection, the signals read back from a run directory, and the
progress line. It names a run directory's files; the apps that read runs back
(the HTML report, the dashboard) are `tootsie.report`, above training.
"""
