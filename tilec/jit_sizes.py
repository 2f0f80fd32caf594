"""How a call's extents become the sizes a specialization is compiled for (`@tilec.jit`'s
key and the extents it tells `tiling`): a whole dimension's bound (`whole_bound`), every other
dimension's size class (`size_class`), and a row dimension's fill run (`fill_run`). The fuzzer's
model of the jit's pipeline (`tilec.fuzz.jit_pipeline`) takes them from here too."""

from __future__ import annotations

from tilec.passes.specialize import SIZE_CLASS_LIMITS, WHOLE_BOUND_PARTS

__all__ = [
    "FILL_FLOOR_BYTES",
    "FILL_SLACK",
    "fill_run",
    "power_of_two",
    "size_class",
    "whole_bound",
]


def power_of_two(n: int) -> int:
    """The least power of two at or above `n` (1 for 0)."""
    return 1 << max(n - 1, 0).bit_length()


def whole_bound(n: int) -> int:
    """The bound a whole dimension of extent `n` is compiled for: `n` rounded up to an eighth
    of its tile (`specialize.WHOLE_BOUND_PARTS`; 3001 -> 3072 in tiles of 4096). The launch
    holds the extent to it; the lowering drops the tile's slots past it (padding whatever the
    extent), so a row of 3001 costs the instructions of 3072 columns, not 4096."""
    granule = max(1, power_of_two(n) // WHOLE_BOUND_PARTS)
    return -(-n // granule) * granule


# How much worse than the best fill of a shorter run a longer contiguous run's tiles may fill
# a row (`fill_run`): a longer run issues fewer instructions a byte, worth a few idle lanes.
FILL_SLACK = 0.05
# The shortest run `fill_run` considers, in bytes: one whole cache line a row of the narrowest
# tensor along the dimension, the floor `tile_shapes` narrows a run to where it must (a
# column walk's grid): 64 bf16 columns, so that 1152 columns take 9 tiles of 128, not 5 of
# 256 with a tenth of the lanes idle. (Was 256 elements whatever their width: a DiT's modulation
# over 8 x 1024 x 1152 bf16 ran 1.22x `torch.compile`'s time, H100, 2026-12-07.)
FILL_FLOOR_BYTES = 128


def fill_run(n: int, element_bytes: int = 2) -> int | None:
    """The longest power-of-two run, of those from `n`'s size class down to one line
    (`FILL_FLOOR_BYTES` of elements of `element_bytes`), whose tiles along `n` elements leave
    idle at most `FILL_SLACK` more of their lanes than the best of them; None when that is the
    class itself (n fills it, or is past the classes). The lanes of the last tile past the
    extent do no work, yet take threads, registers and instructions as the others do: 5000
    columns in tiles of 4096 leave 39% of the lanes idle (a second tile of 904), in tiles of
    1024 2.3%; 32000 in tiles of 16384 2.3%, where 256 would fill them exactly. Recorded in the
    specialization key (a few classes of runs per size class), and given to `tiling` (option
    `fills`)."""
    top = size_class(n)
    if n >= top or n < 1:
        return None
    floor = max(FILL_FLOOR_BYTES // max(element_bytes, 1), 1)
    runs = []
    r = top
    while r >= floor:
        runs.append(r)
        r //= 2
    if not runs:
        return None

    def filled(r: int) -> float:
        return n / (-(-n // r) * r)

    best = max(filled(r) for r in runs)
    run = next(r for r in runs if filled(r) >= best - FILL_SLACK)
    return None if run == top else run


def size_class(n: int) -> int:
    """The class of extent `n` in the specialization key, and the extent `tiling` is told."""
    low, high = SIZE_CLASS_LIMITS
    return min(max(power_of_two(n), low), high)
