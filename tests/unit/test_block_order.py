"""The block-order probe (`tilec.benchmarks.block_order`) without a GPU: it refuses bad
arguments before it needs one, and the kernels it compiles take the order it asks for."""

from __future__ import annotations

import pytest

import tilec
from tilec.benchmarks import block_order
from tilec.compiler import DEFAULT_PIPELINE, build_pipeline, target_pipeline


@pytest.mark.parametrize("groups", ["0", "1,x", "-2"])
def test_bad_groups_are_refused(groups, capsys):
    with pytest.raises(SystemExit) as e:
        block_order.main(["--groups", groups])
    assert e.value.code == 2
    assert "--groups" in capsys.readouterr().err


@pytest.mark.parametrize("group_m", [1, 8])
def test_the_sweep_pins_the_order_of_the_wgmma_kernel(group_m):
    contiguous = f'assume{{all="aligned,unit,divisible"}},{DEFAULT_PIPELINE}'
    pipeline = build_pipeline(contiguous, options={"tiling": {"group_m": group_m}})
    program = tilec.compile(
        str(block_order.EXAMPLES / "matmul.tile"),
        kernels=["matmul"],
        pipeline=target_pipeline(pipeline, "sm_90a"),
    )
    text = program.tir
    assert "version = 3" in text  # the wgmma tiling
    assert ("tilec.group_m" in text) == (group_m > 1)
