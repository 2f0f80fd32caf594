"""The pipeline `@tilec.jit` runs for a generated program, as the differential check runs it
(`tilec.fuzz.differential`): the specialization's facts for contiguous tensors, tiling told
the whole dimensions' extents, the sizes and pipeline variants the check asks for."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tilec.compiler import build_pipeline, target_pipeline
from tilec.ir.types import TensorType
from tilec.jit_sizes import power_of_two, whole_bound

__all__ = [
    "PIPELINE_VARIANTS",
    "SMALL_TILES",
    "SPLIT_PINNED",
    "contiguous_facts",
    "jit_pipeline",
    "positive_scalars",
]

# Three programs in four have tiling's free sizes set this small (what the kernels pin still
# wins): PTX a quarter the size, which LLVM emits and ptxas assembles that much faster, and
# still whole mma.sync tiles. The fourth keeps tiling's own choice (wgmma on sm_90a).
SMALL_TILES = "BM=32,BN=32,BK=16"
# Of the programs that keep tiling's choice, two in three also ask `pipeline` for warp
# specialization, and one of those for persistent blocks too, wherever a kernel allows them
# (a TMA-fed wgmma loop): the producer and consumer regions, and the persistent tile walk,
# then run in the interpreter against the IR before them like every other rewrite.
PIPELINE_VARIANTS = ({}, {"warp_specialize": -1}, {"warp_specialize": -1, "persistent": -1})
SPLIT_PINNED = 3  # split-reduction's split for the programs that pin it (`_run_passes`)


def contiguous_facts(
    module: Any, extents: dict[str, int], positive: Sequence[str] = ()
) -> dict[str, list[Any]]:
    """What contiguous, 16-byte aligned tensors of `extents` promise, by parameter name (what
    `@tilec.jit` records for them: `JitFunction.specialization_of`), that the float scalars
    named in `positive` are positive, and that the tensors of a kernel `flatten` can run as
    one dimension are dense."""
    from tilec.lowering.abi import Specialization, kernel_parameters, recorded_multiple
    from tilec.lowering.layouts import element_bytes

    aligned: set[str] = set()
    unit: set[str] = set()
    values: dict[str, int] = {}
    for func in module.functions:
        shapes, sizes = {}, {}
        for arg in func.arguments:
            if isinstance(arg.type, TensorType):
                shapes[arg] = [d if isinstance(d, int) else extents[d] for d in arg.type.shape]
                sizes[arg] = element_bytes(arg.type.element)
        for p, arg in _parameters_with_arguments(func, kernel_parameters(func)):
            if arg not in shapes:
                continue
            shape = shapes[arg]
            if p.kind == "pointer":
                aligned.add(p.name)
            elif p.kind == "stride":
                stride = math.prod(shape[p.axis + 1 :])
                if stride == 1:
                    unit.add(p.name)
                else:
                    values[p.name] = recorded_multiple(
                        "stride", p.axis, len(shape), stride, sizes[arg]
                    )
            elif p.kind == "extent":
                values[p.name] = recorded_multiple(
                    "extent", p.axis, len(shape), shape[p.axis], sizes[arg]
                )
    # Contiguous tensors are dense: the jit records it for a kernel `flatten` can run as one
    # dimension (`JitFunction.specialization_of`).
    from tilec.passes.flatten import flattening

    dense = set()
    for func in module.functions:
        plan = flattening(func)
        if not isinstance(plan, str):
            dense.update(plan.tensors)
    return Specialization.of_values(aligned, unit, values, positive, dense).to_json()


def positive_scalars(module: Any, inputs: dict[str, dict[str, Any]]) -> list[str]:
    """The float scalars whose sign `@tilec.jit` would key (`scalars_worth_a_sign`: they feed
    a max or min that `hoist-scale` can rewrite) and whose value in every kernel's `inputs`
    (kernel name -> parameter name -> value) is positive and finite: what the jit's
    specialization would promise for this run (`Specialization.positive`)."""
    from tilec.passes.hoist_scale import scalars_worth_a_sign

    wanted: set[str] = set()
    refused: set[str] = set()
    for func in module.functions:
        values = inputs.get(func.sym_name, {})
        for name in scalars_worth_a_sign(func):
            value = values.get(name)
            try:
                ok = value is not None and math.isfinite(float(value)) and float(value) > 0
            except (TypeError, ValueError):
                ok = False
            (wanted if ok else refused).add(name)
    return sorted(wanted - refused)


def _parameters_with_arguments(func: Any, parameters: Sequence[Any]) -> list[tuple[Any, Any]]:
    from tilec.lowering.abi import argument_name

    by_name = {argument_name(func, i): a for i, a in enumerate(func.arguments)}
    return [(p, by_name.get(p.argument)) for p in parameters]


def jit_pipeline(
    module: Any,
    extents: dict[str, int],
    whole: Sequence[str],
    arch: str,
    tiles: str = "",
    pipeline_options: dict[str, object] | None = None,
    split: int = 0,
    positive: Sequence[str] = (),
) -> str:
    """The pipeline `@tilec.jit` runs for contiguous tensors of `extents` on `arch`: `assume`
    with their facts, then the default pipeline with `tiling` told the whole dimensions'
    bounds (`tilec.jit_sizes.whole_bound`; exact where an extent fills its tile) and the
    target. `tiles` sets tiling's
    option of that name (sizes the kernel does not pin: `"BM=32,BN=32"`);
    `pipeline_options`, options of the `pipeline` pass (`PIPELINE_VARIANTS`); `split`,
    split-reduction's option of that name (0: chosen at launch, and a GEMM only where tiling's
    model says so); `positive`, the float scalars the run passes positive values that
    `@tilec.jit` keys the sign of (`positive_scalars`)."""
    tiling: dict[str, object] = {"tiles": tiles} if tiles else {}
    if whole:
        tiling["extents"] = ",".join(f"{d}={whole_bound(extents[d])}" for d in whole)
        exact = [d for d in whole if extents[d] == power_of_two(extents[d])]
        if exact:
            tiling["exact"] = ",".join(exact)
    options: dict[str, dict[str, object]] = {"tiling": tiling} if tiling else {}
    if pipeline_options:
        options["pipeline"] = dict(pipeline_options)
    if split:
        options["split-reduction"] = {"split": split}
    pipeline = target_pipeline(build_pipeline(options=options or None), arch)
    from tilec.lowering.abi import Specialization
    from tilec.passes.assume import assume_pass_text

    facts = Specialization.from_json(contiguous_facts(module, extents, positive))
    return assume_pass_text(facts) + "," + pipeline


def _small_tiles(module: Any) -> str:
    """`SMALL_TILES` for the symbols `module` uses (tiling refuses others): a kernel `flatten`
    will run as one dimension (its tensors are contiguous here) uses that dimension's, the
    product of its grid's small tiles."""
    from tilec.passes.flatten import flattening

    small = dict(item.split("=") for item in SMALL_TILES.split(","))
    sizes: dict[str, str] = {}
    for f in module.functions:
        plan = flattening(f)
        if not isinstance(plan, str):
            product = 1
            for d in plan.dims:
                product *= int(small.get("B" + d, 1))
            sizes[plan.flat_symbol] = str(product)
            continue
        for a in f.arguments:
            if isinstance(a.type, TensorType):
                for d in a.type.shape:
                    if f"B{d}" in small:
                        sizes[f"B{d}"] = small[f"B{d}"]
    return ",".join(f"{s}={n}" for s, n in sizes.items())


def _whole_dimensions(module: Any) -> list[str]:
    """The dimensions some kernel of `module` takes whole (`x[tm, :]`): the jit tells tiling
    their extents, so must the check (or tiling assumes 1024 for each)."""
    whole: dict[str, None] = {}
    for f in module.functions:
        attr = f.attributes.get("tilec.whole_dims")
        whole.update((str(d), None) for d in (attr.value if attr is not None else ()))
    return list(whole)
