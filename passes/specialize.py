"""The `specialize` pass: binds every tile-size symbol to a concrete power-of-two size.

After it, a kernel has static tile shapes: `tile.symbol "BM"` is an `arith.constant`, and every
`tile<BMx...>` type (op results, loop-carried values, block arguments, shared buffers) has
integer dimensions. Tensor views keep their symbolic extents: those are runtime values.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects import arith
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import ArrayAttr, IntegerAttr, StringAttr
from tilec.ir.core import Operation
from tilec.ir.types import SYMBOL_RE, SharedType, TensorType, TileType, Type, index
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = [
    "SIZE_CLASS_LIMITS",
    "Specialize",
    "TilePlan",
    "TileSize",
    "attribute_pairs",
    "bind_tile_sizes",
    "check_size_options",
    "kernels_of",
    "next_power_of_two",
    "parse_assignments",
    "plan_tile_sizes",
    "symbols_of",
]

# Extents are specialized on in classes, the power of two that covers them, from 64 up to
# 16384: no tile-size decision of `tiling` looks further (tiles hold at most 4096 elements, and
# grids of 16384 rows fill any GPU), so longer dimensions share one class and one compilation;
# and none below 64, the heuristic's starting size, so a tiny extent does not bound a pinned
# tensor-core tiling under its smallest warp tiles (4 warps need 32 x 16).
SIZE_CLASS_LIMITS = (1 << 6, 1 << 14)


@register_pass
class Specialize(Pass):
    """Chooses a power-of-two size for every tile-size symbol; tile shapes become static.

    Sizes come from, in order: the kernel's pins (`tilec.pinned_tiles`); the option `tiles`
    (`tiles="BM=64,BN=32"`, symbol names); for a dimension used whole (`tilec.whole_dims`),
    the next power of two at least its extent, given by the option `extents` (`extents="N=777"`)
    or else the default maximum `max_extent`; otherwise a heuristic. The heuristic starts tiled
    dimensions at 64 and contracted dimensions (K of a `tile.dot`) at 32, doubles tiled sizes
    while every tile holds fewer than `min_tile_elements` elements (so a 1-D kernel gets work for
    every thread), then halves the largest free size of any tile holding more than
    `max_tile_elements` (32 values per thread at 4 warps: registers stay sane); a free size is
    never 1 and never more than the next power of two over a known extent. The `tiling` pass
    shares this mechanism (`plan_tile_sizes`, `bind_tile_sizes`) and replaces the heuristic
    for dots.
    Writes `tilec.tile_sizes = [["BM", 64], ...]` on each kernel, and for whole dimensions
    `tilec.max_extent = [["N", 1024], ...]`: the largest extent the kernel handles, which a
    launch must check. Assumes the frontend's conventions: symbol `B<D>` tiles dimension `D`.
    Remarks: per kernel, each size chosen and why.
    """

    name = "specialize"
    summary = "Bind tile-size symbols to power-of-two sizes (static tile shapes)"

    @dataclass
    class Options:
        tiles: str = option("", 'tile sizes by symbol, e.g. "BM=64,BN=32" (pins win)')
        extents: str = option("", 'known extents by dimension, e.g. "N=777"')
        max_extent: int = option(1024, "extent assumed for a whole dimension of unknown extent")
        min_tile_elements: int = option(1024, "grow free sizes until some tile has this many")
        max_tile_elements: int = option(4096, "shrink free sizes of tiles larger than this")

    def run(self, module: Operation, ctx: PassContext) -> None:
        opts = self.options
        tiles, extents = check_size_options(module, opts, self.name)
        for kernel in kernels_of(module):
            if symbols_of(kernel):
                plan = plan_tile_sizes(kernel, tiles, extents, opts.max_extent)
                plan.fit_to_elements(opts.min_tile_elements, opts.max_tile_elements)
                bind_tile_sizes(kernel, plan)
                ctx.remark(kernel, plan.remark())


def kernels_of(module: Operation) -> list[FuncOp]:
    return [op for op in module.walk() if isinstance(op, FuncOp)]


def check_size_options(
    module: Operation, opts, pass_name: str
) -> tuple[dict[str, int], dict[str, int]]:
    """The options `tiles` and `extents` of `opts` (a specialize or tiling `Options`), parsed
    and checked against the kernels of `module`, along with the sizes' other options."""
    tiles = parse_assignments(opts.tiles, "tiles", pass_name)
    extents = parse_assignments(opts.extents, "extents", pass_name)
    for name, size in tiles.items():
        if not _is_power_of_two(size):
            raise TileError(f"{pass_name}: tile size {name}={size} is not a power of two")
    for name in ("max_extent", "min_tile_elements", "max_tile_elements"):
        if getattr(opts, name) < 1:
            raise TileError(
                f"{pass_name}: option '{name}' must be at least 1, got {getattr(opts, name)}"
            )
    used = {s for k in kernels_of(module) for s in symbols_of(k)}
    unknown = sorted(set(tiles) - used)
    if unknown:
        raise TileError(
            f"{pass_name}: option tiles names {', '.join(unknown)}, which no kernel uses",
            hint="symbols in this module: " + (", ".join(sorted(used)) or "none"),
        )
    return tiles, extents


def parse_assignments(text: str, option_name: str, pass_name: str = "specialize") -> dict[str, int]:
    """`"BM=64,BN=32"` -> {"BM": 64, "BN": 32} (also `;` or spaces between entries)."""
    result: dict[str, int] = {}
    for item in text.replace(";", ",").replace(" ", ",").split(","):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not SYMBOL_RE.fullmatch(key) or not value.isdigit():
            raise TileError(
                f"{pass_name}: option {option_name} entry '{item}' is not NAME=SIZE",
                hint=f'write e.g. {option_name}="{"BM=64,BN=32" if option_name == "tiles" else "N=777"}"',
            )
        result[key] = int(value)
    return result


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def next_power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def symbols_of(kernel: FuncOp) -> set[str]:
    """The tile-size symbols a kernel still uses: in tile and shared types, `tile.symbol`, and
    the grid (whose axis needs its size even when no op uses the tile: a block that only
    updates a counter atomically)."""
    bound = {name for name, _ in attribute_pairs(kernel, "tilec.tile_sizes")}
    found = {
        s for _, s in attribute_pairs(kernel, "tilec.grid") if isinstance(s, str) and s not in bound
    }
    for op in kernel.walk():
        if isinstance(op, T.SymbolOp):
            found.add(op.symbol)
        for v in _defined_values(op):
            if isinstance(v.type, (TileType, SharedType)):
                found.update(d for d in v.type.shape if isinstance(d, str))
    return found


def _defined_values(op: Operation):
    yield from op.results
    for region in op.regions:
        for block in region.blocks:
            yield from block.args


def attribute_pairs(kernel: FuncOp, attr: str) -> list[tuple[str, object]]:
    """A kernel attribute of `[["name", value], ...]` pairs, as tuples."""
    a = kernel.attributes.get(attr)
    return [tuple(p) for p in a.value] if a is not None else []  # type: ignore[misc]


def grid_blocks(
    kernel: FuncOp, extents: dict[str, int], least: bool = False
) -> tuple[int, list[str]] | None:
    """(blocks, ["M=4096", ...]): the blocks of `kernel`'s grid (`tilec.grid`, sized by
    `tilec.tile_sizes`) at `extents`, or None where an extent or a tile size is unknown.
    `extents` may be the jit's size classes, each an upper bound: `least` counts the fewest
    blocks they allow instead -- a class n stands for an extent above n / 2, the smallest
    class (`SIZE_CLASS_LIMITS`) for any extent up to it."""
    blocks, dims = 1, []
    sizes = dict(attribute_pairs(kernel, "tilec.tile_sizes"))
    for dim, tile in attribute_pairs(kernel, "tilec.grid"):
        extent = extents.get(str(dim))
        size = sizes.get(str(tile), tile)
        if extent is None or not isinstance(size, int):
            return None
        if least:  # the fewest a class allows (a batch of 4 is "64")
            extent = 1 if extent <= SIZE_CLASS_LIMITS[0] else extent // 2 + 1
        blocks *= -(-extent // size)
        dims.append(f"{dim}={extents[str(dim)]}")
    return blocks, dims


@dataclass
class TileSize:
    """What is known about one symbol while choosing its size."""

    name: str
    size: int
    reason: str
    free: bool  # chosen by the heuristic: may grow or shrink
    contracted: bool = False
    cap: int | None = None  # a free size never exceeds this (a known extent, rounded up)
    dim: str | None = None  # the tensor dimension it tiles (None: hand-written IR's symbol)
    adjusted: str = ""  # how the heuristic moved a free size from its start, and why
    pinned_by: str = ""  # "the kernel" or "option tiles" when pinned: named in errors

    def explain(self) -> str:
        return self.reason + (f", {self.adjusted}" if self.adjusted else "")


@dataclass
class TilePlan:
    """The sizes chosen for one kernel's symbols, before they are bound."""

    symbols: dict[str, TileSize]
    grid: list[str]  # the grid's tile symbols (or sizes), axis by axis
    max_extents: dict[str, int]
    shapes: list[tuple]  # the distinct tile shapes, as written (with symbols)

    def ordered(self) -> list[str]:
        return [s for s in self.grid if s in self.symbols] + sorted(
            set(self.symbols) - set(self.grid)
        )

    def fit_to_elements(self, minimum: int, maximum: int) -> None:
        """The heuristic's second step: grow the free sizes of small tiles, shrink large ones."""
        _grow(self.symbols, self.shapes, minimum)
        _shrink(self.symbols, self.shapes, maximum)

    def remark(self) -> str:
        return "tile sizes: " + "; ".join(
            f"{s}={self.symbols[s].size} ({self.symbols[s].explain()})" for s in self.ordered()
        )


# A whole dimension's extent is bounded, for the lowering, to a multiple of its tile over this.
WHOLE_BOUND_PARTS = 8


def plan_tile_sizes(
    kernel: FuncOp, tiles: dict[str, int], extents: dict[str, int], max_extent: int
) -> TilePlan:
    """Every symbol of `kernel` with its pinned, whole-dimension or starting heuristic size."""
    names = symbols_of(kernel)
    grid = [str(symbol) for _, symbol in attribute_pairs(kernel, "tilec.grid")]
    names.update(s for s in grid if SYMBOL_RE.fullmatch(s))
    pinned = {str(s): int(n) for s, n in attribute_pairs(kernel, "tilec.pinned_tiles")}  # type: ignore[call-overload]
    whole_attr = kernel.attributes.get("tilec.whole_dims")
    whole = {"B" + d: d for d in (whole_attr.value if whole_attr is not None else ())}
    contracted = {
        op.a.type.shape[1]
        for op in kernel.walk()
        if isinstance(op, T.DotOp) and isinstance(op.a.type.shape[1], str)
    }
    tensor_dims = {
        d for a in kernel.arguments if isinstance(a.type, TensorType) for d in a.type.shape
    }
    symbols: dict[str, TileSize] = {}
    max_extents: dict[str, int] = {}
    for name in sorted(names):
        dim = name[1:]
        if name in pinned:
            symbols[name] = TileSize(
                name, pinned[name], "pinned by the kernel", free=False, pinned_by="the kernel"
            )
            if name in tiles and tiles[name] != pinned[name]:
                symbols[name].reason += f" (option tiles {name}={tiles[name]} ignored)"
        elif name in tiles:
            symbols[name] = TileSize(
                name, tiles[name], "option tiles", free=False, pinned_by="option tiles"
            )
        elif name in whole:
            if dim in extents:
                size = next_power_of_two(extents[dim])
                reason = f"whole dim {dim} of extent {extents[dim]}"
            else:
                size = next_power_of_two(max_extent)
                reason = (
                    f"whole dim {dim} of unknown extent: default maximum {size} (option "
                    f"max_extent), larger {dim} is rejected at launch"
                )
            # The bound the launch holds the extent to: the extent rounded up to an eighth of
            # its tile (3001 columns in tiles of 4096: 3072), so that the lowering knows every
            # slot past it is padding (`tilec.max_extent`).
            granule = max(1, size // WHOLE_BOUND_PARTS)
            max_extents[dim] = -(-extents[dim] // granule) * granule if dim in extents else size
            if max_extents[dim] < size:
                reason += f"; bound {max_extents[dim]}: the slots past it are dropped"
            symbols[name] = TileSize(name, size, reason, free=False)
        else:
            is_contracted = name in contracted
            start = 32 if is_contracted else 64
            cap = next_power_of_two(extents[dim]) if dim in extents else None
            if dim not in tensor_dims and name not in grid:
                what = f"symbol {name}"  # hand-written IR: no dimension to name
            else:
                what = f"{'contracted' if is_contracted else 'tiled'} dim {dim}"
            symbols[name] = TileSize(
                name,
                max(2, min(start, cap)) if cap else start,  # never 1: that is the author's call
                f"{what}: heuristic start {start}",
                free=True,
                contracted=is_contracted,
                cap=cap,
                dim=dim,
            )
    return TilePlan(symbols, grid, max_extents, _tile_shapes(kernel))


def bind_tile_sizes(kernel: FuncOp, plan: TilePlan) -> None:
    """Make the kernel's tile shapes static and record the sizes (`tilec.tile_sizes`,
    `tilec.max_extent`)."""
    _rewrite(kernel, {s.name: s.size for s in plan.symbols.values()})
    kernel.attributes["tilec.tile_sizes"] = ArrayAttr(
        tuple(ArrayAttr((StringAttr(s), IntegerAttr(plan.symbols[s].size))) for s in plan.ordered())
    )
    if plan.max_extents:
        kernel.attributes["tilec.max_extent"] = ArrayAttr(
            tuple(
                ArrayAttr((StringAttr(d), IntegerAttr(n)))
                for d, n in sorted(plan.max_extents.items())
            )
        )


def _tile_shapes(kernel: FuncOp) -> list[tuple]:
    """The distinct shapes of the kernel's tiles (as written, with symbols)."""
    shapes: set[tuple] = set()
    for op in kernel.walk():
        for v in _defined_values(op):
            if isinstance(v.type, TileType):
                shapes.add(v.type.shape)
    return sorted(shapes, key=str)


def _elements(shape: tuple, symbols: dict[str, TileSize]) -> int:
    n = 1
    for d in shape:
        n *= symbols[d].size if isinstance(d, str) else (d if isinstance(d, int) else 1)
    return n


def _grow(symbols: dict[str, TileSize], shapes: list[tuple], minimum: int) -> None:
    """Double the smallest free, uncontracted size of the largest tile while every tile holds
    fewer than `minimum` elements (a 64-element vector tile would idle most of a block)."""
    while shapes:
        largest = max(shapes, key=lambda s: _elements(s, symbols))
        if _elements(largest, symbols) >= minimum:
            return
        growable = [
            symbols[d]
            for d in largest
            if isinstance(d, str)
            and symbols[d].free
            and not symbols[d].contracted
            and (symbols[d].cap is None or symbols[d].size < symbols[d].cap)
        ]
        if not growable:
            return
        s = min(growable, key=lambda s: (s.size, s.name))
        s.size *= 2
        s.adjusted = f"grown to {s.size} so that a tile holds ≥ {minimum} elements"


def _shrink(symbols: dict[str, TileSize], shapes: list[tuple], maximum: int) -> None:
    """Halve the largest free size of the largest tile over `maximum` elements, repeatedly."""
    while True:
        over = [
            s
            for s in shapes
            if _elements(s, symbols) > maximum
            and any(isinstance(d, str) and symbols[d].free and symbols[d].size > 2 for d in s)
        ]
        if not over:
            return
        largest = max(over, key=lambda s: _elements(s, symbols))
        s = max(
            (symbols[d] for d in largest if isinstance(d, str) and symbols[d].free),
            key=lambda s: (s.size, s.name),
        )
        s.size //= 2
        shape = "x".join(str(d) for d in largest)
        s.adjusted = f"halved to {s.size} so that tile {shape} holds ≤ {maximum} elements"


def _static(t: Type, sizes: dict[str, int]) -> Type:
    if isinstance(t, TileType):
        return TileType(tuple(sizes.get(d, d) for d in t.shape), t.element, t.layout)  # type: ignore[arg-type]
    if isinstance(t, SharedType):
        return SharedType(tuple(sizes.get(d, d) for d in t.shape), t.element, t.layout)  # type: ignore[arg-type]
    return t


def _rewrite(kernel: FuncOp, sizes: dict[str, int]) -> None:
    for op in list(kernel.walk()):
        for v in _defined_values(op):
            v.type = _static(v.type, sizes)
        if isinstance(op, T.SymbolOp) and op.symbol in sizes:
            constant = arith.ConstantOp.make(
                value=sizes[op.symbol], result_types=[index], loc=op.loc
            )
            constant.results[0].name_hint = op.result.name_hint
            op.parent.insert(op.parent.ops.index(op), constant)
            op.replace_with([constant.result])
