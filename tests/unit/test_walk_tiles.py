"""The `walk-tiles` pass (passes/walk_tiles.py): blocks walk the output tiles and load what
every tile reads (a norm's weight and bias) once. Translation validation through the
interpreter (which launches a persistent kernel's blocks few, so each walks several tiles),
the IR it leaves, the kernels it leaves alone, and that it is off unless enabled."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilec
from tests.validation import check_each_pass, kernel_dimensions, run_kernel
from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import PERSISTENT_ATTRIBUTE
from tilec.interp.runner import random_arguments
from tilec.ir.attributes import BoolAttr
from tilec.ir.verifier import verify
from tilec.passes.walk_tiles import WALK_TILES_ATTRIBUTE
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEFORE = 'canonicalize,cse,tiling{extents="N=%d"},canonicalize,mask-bounds,defer-reduction'
ON = "walk-tiles{enable=true}"


def _run(path: str, name: str, rows: int, cols: int, pipeline: str):
    module = tilec.compile(os.path.join(ROOT, "examples", path), kernels=[name]).module
    func = module.lookup(name)
    extents = dict.fromkeys(kernel_dimensions(func), cols)
    extents["M"] = rows
    inputs = random_arguments(func, extents, seed=rows + cols)
    return module, inputs, _walk(module, pipeline)


def _walk(module, pipeline: str = ON) -> PassContext:
    """Run `pipeline` (by default walk-tiles, on) on `module`, verifying after each pass;
    the remarks."""
    context = PassContext()
    for p in parse_pipeline(pipeline):
        context.current_pass = p.name
        p.run(module, context)
        verify(module)
    return context


@pytest.mark.parametrize(
    ("path", "name", "rows", "cols"),
    [
        ("layernorm.tile", "layernorm", 7, 37),  # more rows than the interpreter's 3 blocks
        ("layernorm.tile", "layernorm", 1, 37),  # one tile: a block walks it, the others none
        ("rmsnorm.tile", "rmsnorm", 11, 53),
    ],
)
def test_the_walk_computes_what_a_block_a_tile_did(path, name, rows, cols):
    module, inputs, _ = _run(path, name, rows, cols, BEFORE % cols)
    before = module.clone()
    _walk(module)
    kernel = module.lookup(name)
    assert PERSISTENT_ATTRIBUTE in kernel.attributes
    after, tiles = run_kernel(module, name, inputs, None)
    expected, _ = run_kernel(before, name, inputs, tiles)
    for got, want in zip(after, expected):
        np.testing.assert_array_equal(got, want)


def test_the_loads_every_tile_reads_go_before_the_walk_with_a_remark():
    module, _, _ = _run("layernorm.tile", "layernorm", 64, 3001, BEFORE % 3001)
    context = _walk(module)
    kernel = module.lookup("layernorm")
    top = list(kernel.body.block.ops)
    (loop,) = [op for op in top if isinstance(op, scf.ForOp)]
    hoisted = [op.view.name_hint for op in top if isinstance(op, T.LoadOp)]
    inside = [op.view.name_hint for op in loop.body.walk() if isinstance(op, T.LoadOp)]
    assert sorted(hoisted) == ["b", "w"]
    assert inside == ["x"]
    assert [op.view.name_hint for op in loop.body.walk() if isinstance(op, T.StoreOp)] == ["y"]
    messages = [r.message for r in context.remarks]
    assert any("%w, %b (16384 bytes a block) loaded once before the walk" in m for m in messages)


def test_a_row_kernel_with_nothing_to_hoist_walks_for_the_prefetch():
    """softmax reads nothing every row shares, but reduces its rows: it could walk them so
    that the register prefetch loads the next row while this one is reduced (off by
    default, recorded for the tuner); walked, it computes what it did."""
    module, _, _ = _run("softmax.tile", "softmax", 8, 300, BEFORE % 300)
    context = _walk(module, "walk-tiles")
    kernel = module.lookup("softmax")
    assert PERSISTENT_ATTRIBUTE not in kernel.attributes
    assert kernel.attributes[WALK_TILES_ATTRIBUTE] == BoolAttr(False)
    assert ["register prefetch" in r.message for r in context.remarks] == [True]
    module, inputs, _ = _run("softmax.tile", "softmax", 8, 300, BEFORE % 300)
    before = module.clone()
    context = _walk(module)
    assert PERSISTENT_ATTRIBUTE in module.lookup("softmax").attributes
    assert any("the walk is for the next tile's loads" in r.message for r in context.remarks)
    after, tiles = run_kernel(module, "softmax", inputs, None)
    expected, _ = run_kernel(before, "softmax", inputs, tiles)
    for got, want in zip(after, expected):
        np.testing.assert_array_equal(got, want)


def test_kernels_it_leaves_alone():
    # an element-wise kernel reads nothing every tile shares and reduces nothing: no walk
    source = """
def scale(x: f32[M, N], y: f32[M, N]):
    for tm, tn in tiles(M, N):
        y[tm, tn] = x[tm, tn] * 2.0
"""
    module = tilec.compile(source, pipeline="canonicalize,cse,tiling,canonicalize").module
    context = _walk(module)
    assert PERSISTENT_ATTRIBUTE not in module.lookup("scale").attributes
    assert not context.remarks
    # a block with a loop of its own (here over a row's tiles): left alone, and says why
    source = """
def shift_rows(x: f32[M, N], s: f32[K], y: f32[M, N]):
    for tm in tiles(M):
        shift = sum(s[:], axis=0)
        for tn in tiles(N):
            y[tm, tn] = x[tm, tn] + shift
"""
    module = tilec.compile(source, pipeline="canonicalize,cse,tiling,canonicalize").module
    context = _walk(module)
    assert PERSISTENT_ATTRIBUTE not in module.lookup("shift_rows").attributes
    assert any("loops or branches" in r.message for r in context.remarks)


def test_tiles_too_large_to_hold_across_the_walk_are_not_hoisted():
    # layer norm over 8192 columns: w and b hold 16384 elements a block, over the 8192 cap
    module, _, _ = _run("layernorm.tile", "layernorm", 64, 8192, BEFORE % 8192)
    context = _walk(module)
    assert PERSISTENT_ATTRIBUTE not in module.lookup("layernorm").attributes
    assert any("hold 16384 elements, over the 8192" in r.message for r in context.remarks)
    module, _, _ = _run("layernorm.tile", "layernorm", 64, 8192, BEFORE % 8192)
    _walk(module, "walk-tiles{enable=true max_elements=16384}")
    assert PERSISTENT_ATTRIBUTE in module.lookup("layernorm").attributes


def test_off_unless_enabled():
    # off: the kernel is left as it was, but the decision is recorded on it (for the tuner,
    # which searches it both ways) and said in a remark
    module, _, _ = _run("layernorm.tile", "layernorm", 64, 3001, BEFORE % 3001)
    text = str(module)
    context = _walk(module, "walk-tiles")
    kernel = module.lookup("layernorm")
    assert kernel.attributes.pop(WALK_TILES_ATTRIBUTE) == BoolAttr(False)
    assert str(module) == text
    assert [r.message for r in context.remarks] == [
        "blocks could walk the output tiles and load %w, %b once; not done "
        "(walk-tiles.enable is off by default)"
    ]
    # on: recorded as taken
    module, _, _ = _run("layernorm.tile", "layernorm", 64, 3001, BEFORE % 3001)
    _walk(module)
    assert module.lookup("layernorm").attributes[WALK_TILES_ATTRIBUTE] == BoolAttr(True)


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize(
    ("path", "name", "sizes"),
    [
        ("layernorm.tile", "layernorm", {"M": 7, "N": 37}),
        ("rmsnorm.tile", "rmsnorm", {"M": 11, "N": 53}),
        ("softmax.tile", "softmax", {"M": 13, "N": 45}),
    ],
)
def test_the_passes_after_it_keep_the_walk_right(path, name, sizes, prefetch):
    """The whole default pipeline with the pass on, one pass at a time, each checked in the
    interpreter against the IR before it (hoist-loads, assign-layouts, vectorize ... inside
    the walk); with `prefetch`, pipeline's register prefetch loads each block's next tile
    before it computes this one (a walk's tile index past the last tile reads nothing: the
    interpreter's 3 blocks over 7 and 11 rows run such an index)."""
    from tilec.compiler import DEFAULT_PIPELINE

    pipeline = DEFAULT_PIPELINE.replace("walk-tiles", ON)
    if prefetch:
        pipeline = pipeline.replace(",pipeline,", ",pipeline{register_prefetch=1},")
    module = tilec.compile(os.path.join(ROOT, "examples", path), kernels=[name]).module
    inputs = random_arguments(module.lookup(name), sizes, seed=1)
    check_each_pass(module, name, pipeline, inputs)
    kernel = module.lookup(name)
    assert PERSISTENT_ATTRIBUTE in kernel.attributes
    assert [op for op in kernel.walk() if scf.is_tile_walk(op)]
    # x's row is loaded before the walk (the first tile's, the prefetch's prologue) only with
    # the prefetch; w and b, which every tile reads, are loaded there either way
    before = [op.view.name_hint for op in kernel.body.block.ops if isinstance(op, T.LoadOp)]
    assert ("x" in before) == prefetch
