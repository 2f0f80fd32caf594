"""mask-bounds on sliding-window attention (`examples/attention_window.tile`): the key loop of
each query tile starts at the first tile the window reaches and stops after the diagonal, the
tiles the window shows entirely run in a loop of their own without its mask, and the kernel
computes the same before and after the pass (translation validation in the interpreter) at
awkward shapes and windows."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.dialects import scf
from tilec.interp.runner import random_arguments
from tilec.interp.semantics import SEMANTICS
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WINDOW = os.path.join(ROOT, "examples", "attention_window.tile")
TILE = 16


def _tiled(d: int):
    pipeline = (
        f'canonicalize,cse,tiling{{tiles="BS={TILE},BT={TILE}",extents="D={d}",exact="D"}},'
        "canonicalize"
    )
    return tilec.compile(WINDOW, kernels=["attention_window"], pipeline=pipeline).module


def _mask_bounds(module):
    shortened = module.clone()
    context = PassContext()
    for p in parse_pipeline("mask-bounds"):
        context.current_pass = p.name
        p.run(shortened, context)
    return shortened, [r.message for r in context.remarks]


def _run_counting(monkeypatch, module, inputs, tile_sizes=None):
    """The kernel's outputs, and how many iterations its key loops ran in all."""
    count = [0]
    original = SEMANTICS[scf.ForOp]

    def counted(state, op, args):
        lower, upper, step = (int(a) for a in args[:3])
        count[0] += len(range(lower, upper, step))
        return original(state, op, args)

    monkeypatch.setitem(SEMANTICS, scf.ForOp, counted)
    outputs, sizes = run_kernel(module, "attention_window", inputs, tile_sizes)
    monkeypatch.setitem(SEMANTICS, scf.ForOp, original)
    return outputs, sizes, count[0]


def _reachable_tiles(s: int, t: int, w: int) -> int:
    """Key tiles holding a key the window can show to some query of the block's tile."""
    return sum(
        1
        for ts in range(0, s, TILE)
        for tt in range(0, t, TILE)
        if tt + TILE - 1 > ts - w and tt < ts + TILE
    )


# (S = T, D, W): a window smaller than a tile, not a multiple of it, longer than the sequence,
# exactly one tile, and empty (W = 0: every row masked, NaN before and after).
CASES = [
    (53, 8, 5),
    (53, 13, 20),
    (70, 7, 33),
    (37, 8, 100),
    (64, 4, 16),
    (1, 3, 7),
    (29, 5, 0),
]


@pytest.mark.parametrize(("n", "d", "w"), CASES, ids=lambda v: str(v))
def test_window_kernel_is_unchanged_and_runs_fewer_key_tiles(monkeypatch, n, d, w):
    before = _tiled(d)
    after, remarks = _mask_bounds(before)
    func = before.lookup("attention_window")
    extents = {"B": 2, "H": 1, "S": n, "T": n}  # D is fixed by the tiling (exact)
    inputs = random_arguments(func, extents, seed=n + w, scalars={"scale": 0.125, "W": w})
    got, sizes, after_count = _run_counting(monkeypatch, after, inputs)
    expected, _, before_count = _run_counting(monkeypatch, before, inputs, sizes)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e, err_msg=f"mask-bounds changed the window kernel ({w=})")
    blocks = extents["B"] * extents["H"]
    tiles = -(-n // TILE)
    assert before_count == blocks * tiles * tiles
    assert after_count == blocks * _reachable_tiles(n, n, w), (after_count, before_count)
    assert any(
        r.startswith("starts at first_tile = the first of its tiles at or past ts - W - 14")
        for r in remarks
    ), remarks


def test_window_remarks_name_both_bounds_and_the_masks():
    _, remarks = _mask_bounds(_tiled(64))
    stop = next(r for r in remarks if r.startswith("stops at"))
    start = next(r for r in remarks if r.startswith("starts at"))
    assert "min(upper, ts + 16)" in stop and "offsets of the loop <= others" in stop
    assert "visible (offsets of the loop > others - W)" in start
    # both ends move with the block: the trip count does not grow with it
    assert not any(r.startswith("blocks walk grid axis") for r in remarks), remarks


def _loops_and_selects(module) -> list[int]:
    from tilec.dialects import tile as T

    func = module.lookup("attention_window")
    loops = [op for op in func.walk() if isinstance(op, scf.ForOp)]
    return [sum(isinstance(o, T.SelectOp) for o in loop.body.block.ops) for loop in loops]


def test_the_tiles_a_window_shows_entirely_run_without_its_mask():
    # Three key loops: the tiles the window's left edge cuts (masked), those it shows whole
    # (no select), and the diagonal and the padding (masked); before: two, the first masked.
    shown, remarks = _mask_bounds(_tiled(64))
    selects = _loops_and_selects(shown)
    assert len(selects) == 3 and selects[1] == 0 and selects[0] > 0 and selects[2] > 0
    assert any(
        r.startswith("the tiles from visible_start = the first at or past ts - W + 16 up to ")
        for r in remarks
    ), remarks
    # middle=false: prefixes only, the window's mask on every tile it does not hide
    (prefixes,) = parse_pipeline("mask-bounds{middle=false}")
    module = _tiled(64)
    prefixes.run(module, PassContext())
    selects = _loops_and_selects(module)
    assert len(selects) == 2 and all(n > 0 for n in selects)


def test_at_d128_the_window_runs_its_three_loops_on_a_producer_warpgroup():
    """With the shown tiles unmasked, the window's steady state is plain attention's: the dots
    bound the loop at d128 (`chain_bound` leaves index masks out), tiling plans a producer
    warpgroup, and the three key loops run warp-specialized -- checked in the interpreter (its
    mbarrier protocol too) against the reference at windows shorter than a tile, of one,
    between, and longer than the sequence."""
    from importlib.util import module_from_spec, spec_from_file_location

    import torch

    from tilec.benchmarks.regret_replay import _described
    from tilec.ir.parser import parse_module
    from tilec.jit import load_kernel
    from tilec.tune.api import problem_for_call
    from tilec.tune.worker import build_candidate

    function = load_kernel(WINDOW, "attention_window")
    shape = torch.empty((1, 2, 300, 128), dtype=torch.float16, device="meta")
    problem = problem_for_call(function, [_described(shape)] * 4 + [0.088, 100], arch="sm_90a")
    build = build_candidate(problem, {})
    assert build.decisions["tiling.producer"] == 1, build.decisions
    assert build.decisions["pipeline.warp_specialize"] == 1, build.decisions
    assert build.ir.count("tile.warp_specialize") == 1 and build.ir.count("scf.for") == 6
    spec = spec_from_file_location("window_reference", WINDOW.replace(".tile", "_reference.py"))
    reference = module_from_spec(spec)
    spec.loader.exec_module(reference)  # type: ignore[union-attr]
    module = parse_module(build.ir)
    func = module.lookup("attention_window")
    for n, w in [(300, 7), (300, 128), (300, 200), (257, 1000)]:
        extents = {"B": 1, "H": 2, "S": n, "T": n}
        inputs = random_arguments(func, extents, seed=w, scalars={"scale": 0.088, "W": w})
        (_q, _k, _v, o), _ = run_kernel(module, "attention_window", inputs)
        expected = reference.attention_window(*inputs[:3], o, np.float32(0.088), w)
        np.testing.assert_allclose(
            o.astype(np.float32), expected.astype(np.float32), atol=2e-3, rtol=2e-3
        )
