"""Passes over tilec IR (imported as `tilec.passes`): each module is one pass."""

from tilec.passes import (  # noqa: F401  (registers the passes)
    assign_layouts,
    assume,
    canonicalize,
    cse,
    dce,
    mask_bounds,
    pipeline,
    precision,
    smem_placement,
    specialize,
    split_reduction,
    tiling,
    vectorize,
)
