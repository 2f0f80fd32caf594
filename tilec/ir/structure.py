"""The structure of an op as a value: two ops are the same program exactly when their
`structure` keys are equal.

    if structure(after) == structure(before):   # the pass changed nothing
        ...

The key is what the text form says, less what does not change meaning: op names, operands
(values numbered in the order the walk first meets them), result and block-argument types,
attributes, regions and blocks, in order. Value name hints and locations are left out.
Attributes and types compare by value, as the printer would write them (`FloatAttr` compares
its printed text, so 0.0 and -0.0 differ and NaN equals NaN). Building the key costs a walk
with no formatting: several times cheaper than `print_op`, which the differential fuzzer used to
compare stages by (`tilec.fuzz.differential`).
"""

from __future__ import annotations

from typing import Any

from tilec.ir.core import Operation

__all__ = ["structure"]


def structure(op: Operation) -> tuple[Any, ...]:
    """A hashable key of `op`'s whole structure (module docstring)."""
    numbers: dict[int, int] = {}
    out: list[Any] = []

    def number(value: Any) -> int:
        return numbers.setdefault(id(value), len(numbers))

    def walk(o: Operation) -> None:
        out.append(o.name)
        out.append(tuple(number(v) for v in o.operands))
        out.append(tuple((r.type, number(r)) for r in o.results))
        out.append(tuple(sorted(o.attributes.items())))
        for region in o.regions:
            out.append("{")
            for block in region.blocks:
                out.append(tuple((a.type, number(a)) for a in block.args))
                for inner in block.ops:
                    walk(inner)
                out.append("^")
            out.append("}")

    walk(op)
    return tuple(out)
