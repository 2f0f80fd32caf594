"""The dialects of tilec's IR. Importing this package registers every op with the parser."""

from tilec.dialects import arith, builtin, math, scan, scf, shared, split, tile  # noqa: F401
