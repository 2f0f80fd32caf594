"""Tensor accesses indexed by an integer tile: the frontend's rules for gathers and scatters.

`table[ids[tm], :]` reads the rows `ids` names; `x[tm, cols]` reads, per row, the columns
`cols` names; `out[idx, :] = v` writes rows. At most one index of an access is a tile (the
*gathered* dimension); its region has one axis per tile, `:` or index tile, as for any access:

* a 1-D index tile `[S]` gives the gathered axis the size `S`, its index shared by every
  element of the other axes (numpy's `x[ids, :]`, `x[tm, cols]` with `cols: i32[BC]`);
* an index tile of the region's rank gives each element its own index; its sizes along the
  other axes must be theirs (`x[tm, cols]` with `cols: i32[BM, BK]` is `[BM, BK]`).

No other rank, and no broadcasting of the index beyond that, is accepted (numpy would; the
rule keeps every element's index where the thread that moves it holds it).

`check_index_tile` and `gathered_shape` are the whole rule: a statement that accesses a
gathered region some other way (an atomic on one) calls them too.
"""

from __future__ import annotations

from tilec.diagnostics import Location, TileError
from tilec.frontend.checked import AccessIndex, DType, Expr, IndexKind, TensorParam
from tilec.frontend.sema_common import _shape_text

__all__ = ["INDEX_DTYPES", "check_index_tile", "gathered_shape"]

INDEX_DTYPES = (DType.I32, DType.I64)


def check_index_tile(
    tensor: TensorParam, position: int, value: Expr, dim, loc: Location
) -> AccessIndex:
    """The access index of dimension `position` of `tensor` given as the tile `value`."""
    t = value.type
    if t.dtype not in INDEX_DTYPES:
        convert = "" if t.dtype.is_int else " (indices are whole numbers)"
        raise TileError(
            f"an index tile must be i32 or i64, not {t}{convert}",
            loc,
            hint="convert it with .to(i32)",
        )
    return AccessIndex(kind=IndexKind.GATHER, dim=dim, value=value, masked=True, loc=loc)


def gathered_shape(tensor: TensorParam, indices: list[AccessIndex], loc: Location) -> tuple:
    """The shape of the region of an access whose indices are `indices`: sizes the gathered
    index of each (None where there is none), or raises the located error."""
    gathered = [i for i in indices if i.kind is IndexKind.GATHER]
    if len(gathered) > 1:
        raise TileError(
            f"only one index of an access to '{tensor.name}' may be an index tile",
            gathered[1].loc,
            hint="gather along one dimension per access; gather the other in a second access",
            notes=(("the first index tile", gathered[0].loc),),
        )
    region = [i for i in indices if i.kind is not IndexKind.SCALAR]
    if not gathered:
        return tuple(i.size for i in region)
    index = gathered[0]
    axis = region.index(index)
    shape = index.value.type.shape  # type: ignore[union-attr]
    if len(shape) == 1:
        index.size = shape[0]
    elif len(shape) == len(region):
        for a, (other, size) in enumerate(zip(region, shape)):
            if a != axis and other.size != size:
                raise TileError(
                    f"index tile of shape {_shape_text(shape)} does not fit the region of "
                    f"'{tensor.name}': axis {a} is {other.size} there, {size} in the index",
                    index.loc,
                    hint="an index tile of the region's rank has its sizes on every axis but "
                    "the gathered one; a 1-D index tile is shared along the other axes",
                )
        index.size = shape[axis]
    else:
        raise TileError(
            f"an index tile must be 1-D or have the region's rank ({len(region)}), "
            f"not {index.value.type}",  # type: ignore[union-attr]
            index.loc,
            hint="one index per row: a 1-D tile; one per element: a tile of the region's shape",
        )
    return tuple(i.size for i in region)
