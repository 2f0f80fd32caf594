"""The GEMM probe's IR (`tilec.benchmarks.gemm_probe`) is a correct, race-free pipeline for
every configuration it sweeps: the interpreter runs it and checks it against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.validation import run_kernel
from tilec.benchmarks.gemm_probe import DEFAULT_CONFIGS, main, probe_ir
from tilec.ir import parse_module


@pytest.mark.parametrize("config", DEFAULT_CONFIGS, ids=lambda c: ",".join(map(str, c)))
def test_probe_ir_multiplies(config):
    module = parse_module(probe_ir(*config))
    rng = np.random.default_rng(sum(config))
    m, n, k = 130, 136, 72  # partial tiles along every dimension
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), dtype=np.float32)
    (_, _, got), _ = run_kernel(module, "matmul_mma", [a, b, c])
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)


def test_print_shows_the_ir(capsys):
    assert main(["--print", "128,128,32,2,2,4"]) == 0
    text = capsys.readouterr().out
    assert "!smem<4x128x32xf16, #a_smem>" in text and "tile.async_wait 2" in text
