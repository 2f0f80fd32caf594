"""The verifier: checks ops against their declarations, their traits and their own rules,
and that every operand is defined before it is used and visible where it is used.

Every failure is a `VerifyError` that names the op, points at its location, and says what is
wrong; the first failure is raised.
"""

from __future__ import annotations

from tilec.ir.attributes import ArrayAttr, IntegerAttr
from tilec.ir.core import (
    ANY_TYPE,
    SEGMENTS_ATTR,
    IsolatedFromAbove,
    Operation,
    Terminator,
    Value,
    VerifyError,
)

__all__ = ["VerifyError", "verify", "verify_op_structure"]


def verify(op: Operation) -> None:
    """Verify `op` and everything nested in it."""
    _verify_nested(op, set())


def _verify_nested(op: Operation, visible: set[Value]) -> None:
    for i, v in enumerate(op.operands):
        if v not in visible:
            raise op.error(
                f"operand #{i} is not defined before this use, or not visible here",
                hint="values must be defined earlier in the same block or in an enclosing one",
            )
    verify_op_structure(op)
    inner_visible = set() if op.has_trait(IsolatedFromAbove) else visible
    for region in op.regions:
        for block in region.blocks:
            added: list[Value] = []
            for a in block.args:
                if a not in inner_visible:
                    inner_visible.add(a)
                    added.append(a)
            for inner in block.ops:
                if inner.parent is not block:
                    raise inner.error("has a wrong parent link (internal inconsistency)")
                _verify_nested(inner, inner_visible)
                for r in inner.results:
                    inner_visible.add(r)
                    added.append(r)
            for v in added:
                inner_visible.discard(v)
    for trait in op.traits:
        trait.verify(op)
    op.verify_()


# Per op class: the attribute names it declares (with the operand segments').
_DECLARED: dict[type, frozenset[str]] = {}


def verify_op_structure(op: Operation) -> None:
    """Check operand/result/attribute/region counts, kinds and type constraints."""
    cls = type(op)
    defs = cls.operand_defs
    if cls.needs_segments:
        segs_attr = op.attributes.get(SEGMENTS_ATTR)
        if not (
            isinstance(segs_attr, ArrayAttr)
            and len(segs_attr.elements) == len(defs)
            and all(isinstance(e, IntegerAttr) and e.value >= 0 for e in segs_attr.elements)
        ):
            raise op.error(
                f"needs attribute '{SEGMENTS_ATTR}': {len(defs)} non-negative operand counts"
            )
        segs = segs_attr.value
        if sum(segs) != len(op.operands):
            raise op.error(
                f"'{SEGMENTS_ATTR}' adds up to {sum(segs)}, but there are {len(op.operands)} operands"
            )
        for d, n in zip(defs, segs):
            if (d.single and n != 1) or (d.optional and n > 1):
                raise op.error(f"'{SEGMENTS_ATTR}' gives {n} operands to '{d.name}'")
    else:
        fixed = sum(d.single for d in defs)
        has_group = any(not d.single for d in defs)
        optional_only = has_group and all(d.single or d.optional for d in defs)
        n = len(op.operands)
        if (
            (not has_group and n != fixed)
            or (has_group and n < fixed)
            or (optional_only and n > fixed + 1)
        ):
            expected = f"{fixed}" if not has_group else f"at least {fixed}"
            raise op.error(f"expects {expected} operand(s), but has {n}")
    pairs = (
        zip(defs, op.operands)  # every operand one value (its count checked above)
        if cls.single_operands
        else ((d, v) for d, group in zip(defs, op.operand_groups()) for v in group)
    )
    for d, v in pairs:
        if d.constraint is not ANY_TYPE and not d.constraint(v.type):
            raise op.error(
                f"operand '{d.name}' must be {d.constraint.description}, but has type {v.type}"
            )
    rdefs = cls.result_defs
    if cls.has_variadic_result:
        if len(op.results) < len(rdefs) - 1:
            raise op.error(
                f"expects at least {len(rdefs) - 1} result(s), but has {len(op.results)}"
            )
    elif len(op.results) != len(rdefs):
        raise op.error(f"expects {len(rdefs)} result(s), but has {len(op.results)}")
    for d in rdefs:
        if d.constraint is ANY_TYPE:
            continue
        value = d.__get__(op, cls)  # an index, without variadic results (`Result.__get__`)
        for r in value if d.variadic else [value]:
            if not d.constraint(r.type):
                raise op.error(
                    f"result '{d.name}' must be {d.constraint.description}, but has type {r.type}"
                )
    declared = _DECLARED.get(cls)
    if declared is None:
        declared = _DECLARED[cls] = frozenset({d.name for d in cls.attr_defs} | {SEGMENTS_ATTR})
    for d in cls.attr_defs:
        attr = op.attributes.get(d.name)
        if attr is None:
            if not d.optional:
                raise op.error(f"requires attribute '{d.name}'")
            continue
        if not isinstance(attr, d.kind):
            kinds = d.kind if isinstance(d.kind, tuple) else (d.kind,)
            names = " or ".join(k.__name__.removesuffix("Attr").lower() for k in kinds)
            raise op.error(f"attribute '{d.name}' must be {names}, got {attr}")
        if d.choices is not None and attr.value not in d.choices:
            shown = ", ".join(str(c) for c in d.choices)
            raise op.error(f"attribute '{d.name}' must be one of {shown}, got {attr}")
    for key in op.attributes:
        if key not in declared and not key.startswith("tilec."):
            # Unknown attributes are allowed only in the `tilec.` namespace (pinned options,
            # remarks, analysis results), so that typos in declared names are caught.
            raise op.error(
                f"has unknown attribute '{key}'",
                hint="declared attributes: "
                + (", ".join(sorted(declared - {SEGMENTS_ATTR})) or "none"),
            )
    if len(op.regions) != len(cls.region_defs):
        raise op.error(f"expects {len(cls.region_defs)} region(s), but has {len(op.regions)}")
    for d, region in zip(cls.region_defs, op.regions):
        if not region.blocks:
            if not d.may_be_empty:
                raise op.error(f"region '{d.name}' must not be empty")
            continue
        for block in region.blocks:
            for inner in block.ops[:-1]:
                if inner.has_trait(Terminator):
                    raise inner.error("must be the last operation in its block")
