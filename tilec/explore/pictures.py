"""The data behind the explorer's pictures: which thread owns which element of a tile, and
where a shared-memory swizzle puts each 16-byte chunk of a row.

Both come from the functions the lowering itself uses: `ThreadMap` (tilec.lowering.layouts)
for register layouts (`#blocked`, `#mma` through `as_blocked`, `#slice`) and `swizzled_offset`
(tilec.lowering.shared_memory) for `#shared` layouts, so a picture shows what the generated code
does. The page draws them (tilec/explore/report.html); here they are plain JSON-ready dicts.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tilec.dialects.tile import DotOperandLayout, SharedLayout
from tilec.ir.core import Operation
from tilec.ir.types import SharedType, TileType, Type
from tilec.lowering.layouts import ThreadMap, element_bytes, layout_error
from tilec.lowering.shared_memory import swizzled_offset

__all__ = ["MAX_SIDE", "layout_picture", "picture_for", "pictures_of", "swizzle_picture"]

# The largest picture drawn, in elements per side: bigger tiles show their top-left corner
# (layouts repeat with a period of at most one block's threads, so the pattern is visible).
MAX_SIDE = 128
# Rows of a swizzle picture: two full periods of the XOR pattern, at most this many.
MAX_SWIZZLE_ROWS = 32
NO_OWNER = 0xFFFF
# Elements per row of the picture of a 1-D tile longer than MAX_SIDE.
WRAP = 64


def _u16(values: np.ndarray) -> str:
    """A little-endian uint16 array as base64 (the page decodes it with a Uint16Array)."""
    return base64.b64encode(values.astype("<u2").tobytes()).decode("ascii")


def _is_static(shape: Sequence[object]) -> bool:
    return all(isinstance(d, int) for d in shape)


def layout_picture(layout: Any, shape: Sequence[int]) -> dict[str, Any]:
    """Owner of every element of a tile of `shape` in `layout`: per element (row-major, the
    tile shown as rows x columns: a 1-D tile as one row, or rows of `WRAP` when longer than
    `MAX_SIDE`; leading dimensions of a higher-rank one flattened into rows) the thread that holds it (`NO_OWNER` for none), the register
    slot it is in there, and how many threads hold a copy. A layout the lowering cannot map
    element by element (an `#dot_operand`) gets a `note` instead of the arrays."""
    shape = tuple(shape)
    title = f"{layout} on {'x'.join(map(str, shape))}"
    picture: dict[str, Any] = {"kind": "layout", "title": title, "layout": str(layout)}
    if isinstance(layout, DotOperandLayout):
        picture["note"] = (
            "mma.sync operand fragments: read from shared memory by ldmatrix, in the register "
            "order tilec/lowering/tensorcore.py and wgmma.py document; no element-by-element picture"
        )
        return picture
    try:
        thread_map = ThreadMap(layout, shape)
    except ValueError as e:
        picture["note"] = f"cannot be drawn: {e}"
        return picture
    problem = layout_error(layout, shape, thread_map.num_warps)
    if problem is not None:
        picture["note"] = f"cannot be drawn: {problem}"
        return picture
    cols = shape[-1] if shape else 1
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    if len(shape) == 1 and cols > MAX_SIDE:
        # A long 1-D tile is drawn in rows of WRAP elements (element i at row i // WRAP).
        rows, cols = math.ceil(cols / WRAP), WRAP
        picture["wrapped"] = WRAP
    table = thread_map.table()  # [threads, slots] -> flat element index
    owners = thread_map.unique_owners()
    size = math.prod(shape)
    owner = np.full(rows * cols, NO_OWNER, dtype=np.int64)
    slot = np.zeros(rows * cols, dtype=np.int64)
    threads = np.nonzero(owners)[0]
    owner[table[threads]] = threads[:, None]
    slot[table[threads]] = np.arange(thread_map.num_slots)[None, :]
    copies = np.bincount(table.ravel(), minlength=size)
    if rows * cols > size:  # the last row of a wrapped 1-D tile is partly empty
        picture["elements"] = size
    shown_rows, shown_cols = min(rows, MAX_SIDE), min(cols, MAX_SIDE)
    keep = (np.arange(shown_rows)[:, None] * cols + np.arange(shown_cols)[None, :]).ravel()
    picture.update(
        rows=rows,
        cols=cols,
        shown_rows=shown_rows,
        shown_cols=shown_cols,
        warps=thread_map.num_warps,
        threads=thread_map.num_threads,
        slots=thread_map.num_slots,
        owner=_u16(owner[keep]),
        slot=_u16(slot[keep]),
        copies=int(copies.max()),
    )
    return picture


def swizzle_picture(buffer: SharedType) -> dict[str, Any]:
    """Where each `vec`-element chunk of a slot's rows lands in shared memory under the
    buffer's `#shared` layout: `chunks[r][p]` is the logical chunk (column / vec) of row `r`
    stored at physical chunk position `p`, by `swizzled_offset`; `banks[r][p]` is the first
    4-byte bank that position of row `r` occupies (of 32; the slot taken to start on a
    128-byte line, as buffers do)."""
    layout = buffer.layout
    assert isinstance(layout, SharedLayout)
    slot_shape = tuple(buffer.shape[1:])
    cols = slot_shape[-1]
    rows = math.prod(slot_shape[:-1]) if len(slot_shape) > 1 else 1
    vec = max(1, layout.vec)
    width = element_bytes(buffer.element)
    chunks_per_row = max(1, cols // vec)
    period = layout.per_phase * layout.max_phase
    shown_rows = min(rows, max(2 * period, 8), MAX_SWIZZLE_ROWS)
    grid = [[0] * chunks_per_row for _ in range(shown_rows)]
    banks = [[0] * chunks_per_row for _ in range(shown_rows)]
    # A row is stored as segments of `segment` elements (the whole row, or wgmma's column
    # blocks); position p of a row counts chunks segment by segment.
    segment = layout.col_block or cols
    for r in range(shown_rows):
        for c in range(chunks_per_row):
            offset = swizzled_offset(layout, slot_shape, r, c * vec)
            p = (c * vec // segment) * (segment // vec) + offset % segment // vec
            grid[r][p] = c
            banks[r][p] = (offset - offset % vec) * width // 4 % 32
    # What one ldmatrix phase reads: the same logical chunk of 8 consecutive rows. On 8
    # different 16-byte bank groups it is conflict-free.
    first = [
        swizzled_offset(layout, slot_shape, r, 0) * width // 16 % 8 for r in range(min(8, rows))
    ]
    return {
        "kind": "swizzle",
        "bank_groups": len(set(first)),
        "title": f"{buffer}",
        "layout": str(layout),
        "rows": rows,
        "cols": cols,
        "shown_rows": shown_rows,
        "vec": vec,
        "chunk_bytes": vec * width,
        "per_phase": layout.per_phase,
        "max_phase": layout.max_phase,
        "chunks": grid,
        "banks": banks,
    }


def _typed_values(module: Operation) -> Iterator[Type]:
    for op in module.walk():
        for result in op.results:
            yield result.type
        for region in op.regions:
            for block in region.blocks:
                for argument in block.args:
                    yield argument.type


def pictures_of(module: Operation) -> dict[str, Type]:
    """Every distinct laid-out tile type and swizzled shared buffer type of the module, by
    its text, in order of first appearance; the caller draws each (`picture_for`) once
    however many stages show it."""
    found: dict[str, Type] = {}
    for t in _typed_values(module):
        if isinstance(t, TileType) and t.layout is not None and _is_static(t.shape):
            key = f"{t.layout} on {'x'.join(map(str, t.shape))}"  # any element type
        elif (
            isinstance(t, SharedType)
            and isinstance(t.layout, SharedLayout)
            and _is_static(t.shape)
            and len(t.shape) >= 2
        ):
            key = f"{t}"
        else:
            continue
        found.setdefault(key, t)
    return found


def picture_for(t: Type) -> dict[str, Any]:
    """The picture of a type `pictures_of` found."""
    if isinstance(t, SharedType):
        return swizzle_picture(t)
    assert isinstance(t, TileType)
    return layout_picture(t.layout, tuple(t.shape))  # type: ignore[arg-type]
