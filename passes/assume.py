"""The `assume` pass: records what a kernel may assume about its arguments, in the IR.

`@tilec.jit` compiles one kernel per *specialization* of its arguments (which pointers are
16-byte aligned, which strides are 1, which extents and strides divide by 16, which float
scalars are positive: `tilec.lowering.abi.Specialization`) and starts its pipeline with this
pass, naming those parameters; `tilec compile --assume aligned,unit,divisible` starts it with
blanket assumptions. Later passes (`vectorize`, `hoist-scale`) and the lowering read the facts
from the kernel's attributes `tilec.aligned`, `tilec.unit`, `tilec.divisible`,
`tilec.multiples` and `tilec.positive` (`kernel_specialization`), so they act on the same
ones; the launcher refuses arguments that break them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects.builtin import FuncOp
from tilec.ir.core import Operation
from tilec.lowering.abi import (
    ASSUMPTIONS,
    Specialization,
    assumed_specialization,
    kernel_parameters,
    set_kernel_specialization,
)
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["Assume", "assume_pass_text"]


@register_pass
class Assume(Pass):
    """Records the argument facts a kernel is compiled for as kernel attributes.

    Options name parameters (`tilec.lowering.abi`'s names: `x`, `x.extent.0`, `x.stride.1`),
    comma-separated: `aligned` -- pointers 16-byte aligned; `unit` -- strides equal to 1;
    `divisible` -- extents or strides that are multiples of 16; `multiples` -- `name=m` for
    extents or strides that are multiples of m = 2, 4 or 8 (`x.stride.0=8`: rows of 1000
    f16 are 16-byte vectors though not 16 elements); `positive` -- float scalars that are
    finite and above zero (`scale`: what lets `hoist-scale` take `max(s * scale)` as
    `max(s) * scale`); `dense` -- tensors row-major with no gaps (what lets `flatten` run an
    element-wise kernel as one dimension). `all` is a list of blanket assumptions (`aligned,unit,divisible`, and
    `positive` and `dense` only when listed) for every argument: every pointer aligned, every last stride
    1, every other stride and every extent a multiple of 16, every float scalar positive. A
    kernel gets `tilec.aligned`, `tilec.unit`, `tilec.divisible`, `tilec.positive` (sorted
    names), `tilec.multiples` (pairs), replacing earlier ones; a name that none of the
    module's kernels has (as a parameter of the right kind) is an error. Remark: the facts,
    per kernel.
    """

    name = "assume"
    summary = "Record argument facts (alignment, strides, divisibility, signs) on kernels"

    @dataclass
    class Options:
        aligned: str = option("", 'pointer parameters aligned to 16 bytes, e.g. "x,y"')
        unit: str = option("", 'stride parameters equal to 1, e.g. "x.stride.1"')
        divisible: str = option("", 'extents/strides that are multiples of 16, e.g. "x.extent.0"')
        multiples: str = option(
            "", 'extents/strides that are multiples of 2, 4 or 8, e.g. "x.stride.0=8"'
        )
        positive: str = option("", 'float scalars finite and above zero, e.g. "scale"')
        dense: str = option("", 'tensors row-major with no gaps (flatten), e.g. "x,y"')
        all: str = option(
            "", 'blanket assumptions for every argument: "aligned,unit,divisible" (+ "positive")'
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        opts = self.options
        fields = ("aligned", "unit", "divisible", "positive", "dense")
        named = {f: _names(getattr(opts, f)) for f in fields}
        blanket = _names(opts.all)
        for kind in blanket - set(ASSUMPTIONS):
            raise TileError(
                f"assume: unknown assumption '{kind}'", hint="one of " + ", ".join(ASSUMPTIONS)
            )
        used: set[str] = set()
        multiples = _multiples(opts.multiples)
        for kernel in module.walk():
            if not isinstance(kernel, FuncOp):
                continue
            mine = {p.name for p in kernel_parameters(kernel)}
            base = assumed_specialization(kernel, blanket)
            facts = {f: getattr(base, f) | (names & mine) for f, names in named.items()}
            mine_multiples = frozenset(
                (n, m) for n, m in multiples.items() if n in mine and n not in facts["divisible"]
            )
            used |= (set().union(*named.values()) | set(multiples)) & mine
            try:
                spec = Specialization(**facts, multiples=mine_multiples)
                set_kernel_specialization(kernel, spec)
            except ValueError as e:
                raise TileError(f"assume: {e}", kernel.loc) from None
            text = "; ".join(f"{f}: {', '.join(sorted(v))}" for f, v in facts.items() if v)
            if mine_multiples:
                listed = ", ".join(f"{n} of {m}" for n, m in sorted(mine_multiples))
                text += ("; " if text else "") + f"multiples: {listed}"
            ctx.remark(kernel, "assumes " + (text or "nothing about its arguments"))
        unknown = (set().union(*named.values()) | set(multiples)) - used
        if unknown:
            raise TileError(f"assume: no kernel has a parameter {', '.join(sorted(unknown))}")


def _names(text: str) -> set[str]:
    return {n.strip() for n in text.split(",") if n.strip()}


def _multiples(text: str) -> dict[str, int]:
    """`x.stride.0=8,y.extent.1=4` as a mapping (a TileError for anything else)."""
    out: dict[str, int] = {}
    for item in _names(text):
        name, eq, value = item.partition("=")
        if not eq or not value.strip().isdigit():
            raise TileError(
                f"assume: multiples takes name=m pairs (m = 2, 4 or 8), got '{item}'",
                hint='e.g. multiples="x.stride.0=8"',
            )
        out[name.strip()] = int(value)
    return out


def assume_pass_text(specialization: Specialization) -> str:
    """The `assume` pass, as pipeline text, that records `specialization` on a kernel (what
    `@tilec.jit` and the fuzzers' differential compile start with)."""
    facts = specialization.to_json()
    fields = ("aligned", "unit", "divisible", "positive", "dense")
    options = [f'{k}="{",".join(facts[k])}"' for k in fields if facts.get(k)]
    if facts["multiples"]:
        options.append('multiples="' + ",".join(f"{n}={m}" for n, m in facts["multiples"]) + '"')
    return "assume{" + " ".join(options) + "}" if options else "assume"
