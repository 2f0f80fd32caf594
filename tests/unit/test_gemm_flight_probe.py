"""`tilec.benchmarks.gemm_flight_probe` on the CPU: every configuration it sweeps names real
decisions and builds the tiling it says (the timing needs a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilec.benchmarks.gemm_flight_probe import CONFIGS, EPILOGUE_CONFIGS, main
from tilec.jit import load_kernel
from tilec.tune import build_candidate, problem_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"M": 4096, "N": 4096, "K": 4096}


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_each_configuration_builds_the_wgmma_tiling_it_pins(config):
    problem = problem_for(load_kernel(EXAMPLES / "matmul.tile", "matmul"), SIZES, arch="sm_90a")
    built = build_candidate(problem, config)
    assert built.status == "built", built.reason
    assert built.decisions["path"] == "wgmma"
    for name, value in config.items():
        if name != "stages":  # a pinned stage count may be cut to what fits
            assert built.decisions[name] == value, name


def test_the_epilogue_configurations_build_on_the_fused_kernel():
    kernel = load_kernel(EXAMPLES / "matmul_bias_gelu.tile", "matmul_bias_gelu")
    problem = problem_for(kernel, SIZES, arch="sm_90a")
    for config in EPILOGUE_CONFIGS:
        assert build_candidate(problem, config).status == "built", config


def test_a_bad_shape_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        main(["--shape", "4096x4096"])
    assert "MxNxK" in capsys.readouterr().err
