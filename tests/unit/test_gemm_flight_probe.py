"""`tilec.benchmarks.gemm_flight_probe` on the CPU: every configuration it sweeps names real
decisions and builds the tiling or schedule it says, a refused one is reported with its
reason, and the command line gives the cases it says (the timing needs a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilec.benchmarks.gemm_flight_probe import (
    CONFIGS,
    EPILOGUE_CONFIGS,
    SCHEDULE_CONFIGS,
    main,
    parse_shape,
    plan,
)
from tilec.ir.parser import parse_module
from tilec.jit import load_kernel
from tilec.tune import FakeClock, Settings, Tuner, build_candidate, problem_for
from tilec.tune.api import fake_cost
from tilec.tune.space import applicable

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"M": 4096, "N": 4096, "K": 4096}
SMALL = {"M": 512, "N": 384, "K": 256}
# A cluster refused: its blocks release shared stages through a producer warpgroup's barriers.
REFUSED = {"pipeline.cluster": 2, "pipeline.warp_specialize": 0}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))


def _problem(example: str, kernel: str, sizes: dict[str, int]):
    return problem_for(load_kernel(EXAMPLES / example, kernel), sizes, arch="sm_90a")


def _searched(problem) -> dict:
    """The tuner's decisions for `problem` (read off the heuristic's kernel), by name."""
    heuristic = build_candidate(problem, {})
    assert heuristic.status == "built", heuristic.reason
    kernel = parse_module(heuristic.ir, "x").functions[0]
    return {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}


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


@pytest.mark.parametrize(
    "example, kernel", [("matmul.tile", "matmul"), ("gemm_layouts.tile", "gemm_nt")]
)
def test_each_schedule_configuration_is_tuner_decisions_that_build_what_they_pin(example, kernel):
    problem = _problem(example, kernel, SMALL)
    searched = _searched(problem)
    for config in SCHEDULE_CONFIGS:
        for name, value in config.items():
            assert name in searched and value in searched[name].values, (config, name)
        built = build_candidate(problem, config)
        assert built.status == "built", (config, built.reason)
        assert built.decisions["path"] == "wgmma"
        for name, value in config.items():
            assert built.decisions[name] == value, (config, name)
        if config.get("pipeline.cluster") == 2:  # clusters imply a producer warpgroup
            assert built.decisions["pipeline.warp_specialize"] == 1


def test_the_schedule_configurations_build_or_say_why_not_on_bmm():
    problem = _problem("bmm.tile", "bmm", {"Z": 2, "M": 256, "N": 512, "K": 128})
    searched = _searched(problem)
    heuristic = build_candidate(problem, {})
    for config in SCHEDULE_CONFIGS:
        assert all(name in searched for name in config), config
        built = build_candidate(problem, config)
        assert built.status in ("built", "pruned"), (config, built.reason)
        assert built.status == "built" or built.reason.startswith("pipeline: option"), config
    # A 3-D grid keeps the launch order: the same code as the heuristic's.
    assert build_candidate(problem, {"tiling.group_m": 1}).code == heuristic.code


def test_the_sweep_times_the_schedule_and_reports_a_refused_configuration_with_its_reason():
    problem = _problem("matmul.tile", "matmul", {"M": 256, "N": 256, "K": 128})
    settings = Settings(budget_s=300, workers=2, progress=False, finalists=0)
    result = Tuner(settings).sweep(problem, FakeClock(fake_cost), [*SCHEDULE_CONFIGS, REFUSED])
    for config in SCHEDULE_CONFIGS:
        assert result.candidate_for(config).timed, config
    refused = result.candidate_for(REFUSED)
    assert refused.status == "pruned" and not refused.timed
    assert "option cluster = 2, but the kernel is not warp-specialized" in refused.reason


def test_shapes_name_a_layout_or_a_batched_kernel():
    assert parse_shape("4096x4096x4096") == (None, (4096, 4096, 4096))
    assert parse_shape("nt:4000x3000x1000") == ("nt", (4000, 3000, 1000))
    assert parse_shape("BMM:8x1024x1024x1024") == ("bmm", (8, 1024, 1024, 1024))
    for bad, says in [
        ("bmm:1024x1024x1024", "bmm:ZxMxNxK"),
        ("4096x4096x4096x8", "MxNxK"),
        ("nt:64x0x64", "MxNxK"),
        ("xy:64x64x64", "unknown kernel 'xy'"),
    ]:
        with pytest.raises(ValueError, match=says):
            parse_shape(bad)


def test_a_bad_shape_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        main(["--shape", "4096x4096"])
    assert "MxNxK" in capsys.readouterr().err


def test_the_default_sweep_is_the_flight_configurations_at_three_shapes():
    _args, cases, configs = plan([])
    assert configs is CONFIGS
    assert cases == [
        ("nn", (4096, 4096, 4096)),
        ("nn", (3000, 5000, 2000)),
        ("nn", (1536, 6144, 768)),
    ]


def test_the_schedule_set_runs_the_gemms_and_bmms_persistent_probe_timed():
    _args, cases, configs = plan(["--configs", "schedule"])
    assert configs is SCHEDULE_CONFIGS
    assert cases == [
        ("nn", (4000, 3000, 1000)),
        ("nn", (4096, 4096, 4096)),
        ("nn", (8192, 8192, 8192)),
        ("nt", (4000, 3000, 1000)),
        ("nn", (2048, 2048, 2048)),
        ("nn", (3000, 5000, 2000)),
        ("bmm", (8, 1024, 1024, 1024)),
        ("bmm", (64, 256, 256, 64)),
    ]


def test_layouts_take_turns_over_the_shapes_that_name_none():
    argv = ["--layout", "nt", "--layout", "tt", "--shape", "64x64x64", "--shape", "bmm:2x3x4x5"]
    _args, cases, _configs = plan(argv)
    assert cases == [("nt", (64, 64, 64)), ("bmm", (2, 3, 4, 5)), ("tt", (64, 64, 64))]


def test_configurations_on_the_command_line_replace_the_sets_after_the_heuristic(capsys):
    argv = ["--configs", "schedule", "--config", "pipeline.warp_specialize=1"]
    _args, _cases, configs = plan([*argv, "--config", "pipeline.cluster=2,tiling.group_m=2"])
    assert configs == [
        {},
        {"pipeline.warp_specialize": 1},
        {"pipeline.cluster": 2, "tiling.group_m": 2},
    ]
    _args, _cases, configs = plan(["--configs", "schedule", "--config", "heuristic"])
    assert configs == [{}]  # the heuristic's kernel alone
    with pytest.raises(SystemExit):
        plan(["--config", "pipeline.cluster"])
    assert "DECISION=VALUE" in capsys.readouterr().err
