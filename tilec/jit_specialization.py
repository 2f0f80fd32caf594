"""What a `@tilec.jit` call's arguments promise: the facts (`tilec.lowering.Specialization`)
its key records and its pipeline starts with (the `assume` pass). `tilec.jit` keeps the
functions' own rules (which scalars' signs and which tensors' density are worth a key);
these read the facts off converted arguments."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from tilec.runtime.arguments import is_positive

__all__ = ["_all_dense", "_assume_pass", "_specialization"]


def _all_dense(values: Sequence[Any]) -> bool:
    """Whether every tensor of `values` is dense: row-major with no gaps (what `flatten`
    needs of a kernel's tensors to run it as one dimension of their elements)."""
    from tilec.runtime import DeviceTensor
    from tilec.runtime.arguments import is_dense

    return all(is_dense(v) for v in values if type(v) is DeviceTensor)


def _assume_pass(specialization: Any) -> str:
    """The `assume` pass (passes/assume.py) that records `specialization` on the kernel."""
    from tilec.passes.assume import assume_pass_text

    return assume_pass_text(specialization)


def _specialization(parameters: Sequence[Any], arguments: Any, signs: Collection[str] = ()) -> Any:
    """What `arguments` promise, by parameter name (the facts `JitFunction._key` records):
    of the scalars named in `signs`, those that are positive."""
    from tilec.lowering import Specialization
    from tilec.lowering.abi import recorded_multiple
    from tilec.runtime import DeviceTensor
    from tilec.runtime.arguments import ELEMENT_BYTES

    tensors, scalars = {}, {}
    names = list(dict.fromkeys(p.argument for p in parameters))
    for name, value in zip(names, arguments.values):
        (tensors if isinstance(value, DeviceTensor) else scalars)[name] = value
    aligned, unit, values = set(), set(), {}
    positive = [
        p.name for p in parameters if p.name in signs and is_positive(p.dtype, scalars[p.name])
    ]
    for p in parameters:
        t = tensors.get(p.argument)
        if t is None:
            continue
        if p.kind == "pointer" and t.pointer % 16 == 0:
            aligned.add(p.name)
        elif p.kind == "stride":
            stride = t.strides[p.axis]
            if stride == 1:
                unit.add(p.name)
            else:
                size = ELEMENT_BYTES[t.dtype]
                values[p.name] = recorded_multiple("stride", p.axis, len(t.shape), stride, size)
        elif p.kind == "extent":
            size = ELEMENT_BYTES[t.dtype]
            extent = t.shape[p.axis]
            values[p.name] = recorded_multiple("extent", p.axis, len(t.shape), extent, size)
    return Specialization.of_values(aligned, unit, values, positive)
