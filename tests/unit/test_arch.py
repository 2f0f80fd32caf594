"""One table from compute capability to the architecture tilec compiles for, used both by
`default_arch` (nvidia-smi, no driver) and the runtime's `device_arch` (no GPU needed here)."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from tilec.diagnostics import TileError
from tilec.lowering import ptx
from tilec.lowering.ptx import FALLBACK_ARCH, arch_for_capability, default_arch
from tilec.runtime.device import device_arch


@pytest.mark.parametrize(
    ("capability", "arch"),
    [
        ((8, 0), "sm_80"),
        ((8, 7), "sm_86"),
        ((8, 9), "sm_89"),
        ((9, 0), "sm_90a"),
        ((10, 0), "sm_90"),
        ((7, 5), None),
    ],
)
def test_capabilities_map_to_architectures(capability, arch):
    assert arch_for_capability(capability) == arch


@pytest.mark.parametrize(
    ("smi_output", "arch"),
    [
        ("8.6\n", "sm_86"),
        ("9.0\n9.0\n", "sm_90a"),
        ("12.0\n", "sm_90"),
        ("", FALLBACK_ARCH),
        ("junk\n", FALLBACK_ARCH),
        ("7.0\n", FALLBACK_ARCH),
    ],
)
def test_default_arch_reads_nvidia_smi(monkeypatch, smi_output, arch):
    monkeypatch.setattr(ptx.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(
        ptx.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, smi_output, "")
    )
    default_arch.cache_clear()
    try:
        assert default_arch() == arch
    finally:
        default_arch.cache_clear()


def test_device_arch_uses_the_same_table_and_refuses_older_gpus():
    assert device_arch(SimpleNamespace(compute_capability=(9, 0), name="H200")) == "sm_90a"
    with pytest.raises(TileError, match=r"compute capability 7\.5"):
        device_arch(SimpleNamespace(compute_capability=(7, 5), name="T4"))
