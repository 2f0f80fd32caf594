"""tilec's MLIR-style IR: types, attributes, values, operations, blocks, regions; the text
form (printer and parser); the verifier; and the builder.
"""

from tilec.ir.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
from tilec.ir.builder import Builder
from tilec.ir.core import (
    Block,
    BlockArgument,
    Operation,
    OpResult,
    Region,
    Value,
    VerifyError,
    op_class,
)
from tilec.ir.parser import parse_module
from tilec.ir.printer import print_op
from tilec.ir.verifier import verify

__all__ = [
    "ArrayAttr",
    "Attribute",
    "Block",
    "BlockArgument",
    "BoolAttr",
    "Builder",
    "FloatAttr",
    "IntegerAttr",
    "OpResult",
    "Operation",
    "Region",
    "StringAttr",
    "SymbolRefAttr",
    "TypeAttr",
    "UnitAttr",
    "Value",
    "VerifyError",
    "op_class",
    "parse_module",
    "print_op",
    "verify",
]
