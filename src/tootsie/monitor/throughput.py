"""Model FLOPs utilization: achieved training FLOPs over the accelerator's peak.

MFU = flops_per_token × tokens/s ÷ (peak FLOP/s × devices), with the model's
`flops_per_token`: an MoE's counts its active parameters (router, the k chosen
experts, shared experts), not the experts a token skips. Peaks are dense
bf16 figures from the vendors' data sheets (no sparsity); an unknown device
(a CPU, say) has no peak and MFU is reported as None rather than invented.
`TOOTSIE_PEAK_FLOPS` overrides the table (FLOP/s per device), e.g. for a CPU
measured with a matmul benchmark.
"""

import os

# Dense bf16 peak FLOP/s per device, from vendor data sheets.
PEAK_BF16_FLOPS: dict[str, float] = {
    "h100": 989e12,  # H100 SXM
    "h200": 989e12,  # H200 SXM: same compute as H100 SXM
    "a100": 312e12,
    "l40s": 362e12,
    "tpu v4": 275e12,
    "tpu v5 lite": 197e12,  # v5e
    "tpu v5p": 459e12,
    "tpu v6 lite": 918e12,  # v6e (Trillium)
}


def device_peak_flops(device_kind: str) -> float | None:
    """Peak dense bf16 FLOP/s of one device, from its `device_kind` string; None when unknown."""
    override = os.environ.get("TOOTSIE_PEAK_FLOPS")
    if override:
        return float(override)
    kind = device_kind.lower()
    for name, flops in PEAK_BF16_FLOPS.items():
        if name in kind:
            return flops
    return None


def mfu(flops_per_token: float, tokens_per_second: float, device_kind: str, num_devices: int = 1) -> float | None:
    """Model FLOPs utilization in [0, 1], or None when the device's peak is unknown."""
    peak = device_peak_flops(device_kind)
    return None if peak is None else flops_per_token * tokens_per_second / (peak * num_devices)
