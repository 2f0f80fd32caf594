"""The dialects of tilec's IR. Importing this package registers every op with the parser."""

from tilec.dialects import (  # noqa: F401
    arith,
    atomic,
    builtin,
    gather,
    math,
    random,
    scan,
    scf,
    shared,
    split,
    tile,
    tile_patterns,
    tma,
    warp_specialize,
)
