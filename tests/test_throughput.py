"""MFU uses the data-sheet peak of known devices and refuses to guess for unknown ones."""

import pytest

from tootsie.monitor.throughput import device_peak_flops, mfu


def test_known_and_unknown_devices(monkeypatch) -> None:
    monkeypatch.delenv("TOOTSIE_PEAK_FLOPS", raising=False)
    assert device_peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert device_peak_flops("cpu") is None and mfu(1e9, 1e3, "cpu") is None
    assert mfu(6e9, 82_416.7, "NVIDIA H200") == pytest.approx(0.5, rel=1e-3)


def test_override_for_cpus(monkeypatch) -> None:
    monkeypatch.setenv("TOOTSIE_PEAK_FLOPS", "1e11")
    assert mfu(1e7, 5e3, "cpu") == pytest.approx(0.5)
