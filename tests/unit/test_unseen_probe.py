"""The unseen-kernels probe (`tilec.benchmarks.unseen_probe`): every kernel of `unseen.tile`,
compiled through the default pipeline at small shapes no tile divides, computes in the
interpreter what its case's torch expression computes (on the CPU), so that the probe's GPU
figures are of right kernels; and its cases are well formed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import tilec
from tilec.benchmarks import unseen_probe
from tilec.compiler import DEFAULT_PIPELINE
from tilec.fuzz.jit_pipeline import contiguous_facts
from tilec.interp import run_kernel
from tilec.lowering.abi import Specialization
from tilec.passes.assume import assume_pass_text
from tilec.passmanager import PassManager, parse_pipeline

SMALL = {1: (1001,), 2: (5, 77), 3: (2, 7, 13)}  # by rank: extents that no tile divides
TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
FIRST = {c.kernel: c for c in reversed(unseen_probe.CASES)}  # the first case of each kernel


def _cpu_new(rng):
    def new(shape, dtype, kind):
        if kind == "mask":
            mask = (rng.random(shape) > 0.3).astype(np.float32)
            mask[..., 0] = 1
            return torch.from_numpy(mask).to(TORCH[dtype])
        values = rng.standard_normal(shape).astype(np.float32)
        if kind == "empty":
            values[:] = np.nan
        return torch.from_numpy(values).to(TORCH[dtype])

    return new


def _numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.float().numpy().astype(ml_dtypes.bfloat16)
    return t.numpy().copy()


@pytest.mark.parametrize("name", sorted(FIRST))
def test_each_kernel_computes_its_torch_expression(name):
    case = FIRST[name]
    shape = SMALL[len(case.shape)]
    ins = case.inputs(shape, _cpu_new(np.random.default_rng(7)))
    arrays = [_numpy(t) for t in ins]
    module = tilec.compile(unseen_probe.KERNELS, kernels=[name]).module
    func = module.lookup(name)
    dims = {}
    for arg, array in zip(func.arguments, arrays):
        for d, n in zip(getattr(arg.type, "shape", ()), array.shape):
            if isinstance(d, str):
                dims[d] = n
    extents = ",".join(f"{d}={n}" for d, n in dims.items())
    pipeline = DEFAULT_PIPELINE.replace("tiling,", f'tiling{{extents="{extents}"}},', 1)
    # The facts the jit records for contiguous tensors (flatten's among them).
    facts = Specialization.from_json(contiguous_facts(module, dims))
    pipeline = assume_pass_text(facts) + "," + pipeline
    PassManager(parse_pipeline(pipeline)).run(module)
    run_kernel(module, name, [*arrays, *case.scalars])
    n_in = len(ins) - case.outputs
    expected = case.torch(*ins[:n_in])
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(arrays[n_in:], expected):
        np.testing.assert_allclose(
            got.astype(np.float64),
            want.double().numpy(),
            rtol=case.rtol,
            atol=case.atol,
            err_msg=f"{name} at {shape}",
        )


def test_cases_are_well_formed():
    kernels = {c.kernel for c in unseen_probe.CASES}
    assert kernels == set(tilec.compile(unseen_probe.KERNELS).kernels)
    for case in unseen_probe.CASES:
        made = case.inputs(case.shape, lambda shape, dtype, kind: (shape, dtype, kind))
        assert [kind for *_, kind in made[-case.outputs :]] == ["empty"] * case.outputs
        assert len(case.shape) in SMALL and case.moved(case.shape) > 0
    assert unseen_probe.main(["--only", "no_such_kernel"]) == 1


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--shape", "300,24"], "--shape needs --only"),
        (["--only", "l2norm", "--shape", "3,300,24"], "other ranks"),
        (["--only", "l2norm", "--config", "BM={not json"], "--config NAME=JSON"),
        (["--only", "l2norm", "--shape", "300,x"], "--shape D,D"),
    ],
)
def test_bad_shapes_and_configurations_are_refused_before_anything_runs(argv, said, capsys):
    with pytest.raises(SystemExit) as e:
        unseen_probe.main(argv)
    assert e.value.code == 2 and said in capsys.readouterr().err


def test_a_configurations_name_may_hold_an_equals_sign():
    assert unseen_probe._config('BM=128={"tile.M": 128}') == ("BM=128", {"tile.M": 128})
    assert unseen_probe._config('plain={"warps":8}') == ("plain", {"warps": 8})
    with pytest.raises(ValueError, match="not NAME=JSON"):
        unseen_probe._config('{"warps": 8}')


def test_compile_only_reads_a_column_scan_before_it_is_timed(capsys):
    """`--compile-only` compiles as the jit would, on the CPU: the column cumsum's scan takes
    runs of rows (one lane step where the repeats took one each) unless the option says not,
    and, split across blocks at launch (a split scan), its tiles are a line of columns wide."""
    argv = ["--compile-only", "--only", "col_cumsum", "--shape", "8192,1000"]
    argv += ["--config", 'no runs={"assign-layouts.scan_runs": false}']
    assert unseen_probe.main(argv) == 0
    out = capsys.readouterr().out
    assert "heuristics: built" in out and "no runs: built" in out
    case = dataclasses.replace(
        next(c for c in unseen_probe.CASES if c.kernel == "col_cumsum"), shape=(8192, 1000)
    )
    runs = unseen_probe.compiled(case)
    plain = unseen_probe.compiled(case, {"assign-layouts.scan_runs": False})
    assert runs["decisions"]["assign-layouts.scan_runs"] is True
    assert runs["decisions"]["split"] == "auto"
    assert (runs["decisions"]["tile.M"], runs["decisions"]["tile.N"]) == (64, 32)
    assert 0 < runs["shuffles"] < plain["shuffles"] // 2
    assert runs["accesses"] == plain["accesses"] and runs["accesses"]["ld.v4.32"] > 0
