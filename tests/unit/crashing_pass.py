"""`tilec` with one more pass, `crash`, that fails with a Python exception: a stand-in for a
compiler bug. The CLI tests run it as a script (`python crashing_pass.py opt ...`)."""

import sys

from tilec.cli import main
from tilec.passmanager import Pass, register_pass


@register_pass
class Crash(Pass):
    """Fails with a Python exception (a stand-in for a compiler bug)."""

    name = "crash"
    summary = "Raise an exception"

    def run(self, module, ctx):
        raise KeyError("no layout for %x")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
