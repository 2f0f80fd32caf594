"""`tilec.passes` and `tilec.runtime` from the checkout this `tilec` package lies in.

The two live in top-level folders (`passes/`, `runtime/`) that `pyproject.toml` maps into the
package. An editable install maps them by absolute path to the checkout it was made from, so
a copy of another tree run from its own folder (an A/B measurement of an older commit:
`cd old && python -m tilec.benchmarks.gpu`) would import its own `tilec` but the installed
checkout's passes and runtime -- a mixed compiler, measured as if it were the old one. In a
source checkout (a `pyproject.toml` beside the package) a finder placed first on
`sys.meta_path` maps those names to the folders beside this package instead. An installed
wheel has them inside the package and no checkout around it: nothing is bound.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["bind_checkout_packages"]

PACKAGES = ("passes", "runtime")


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds `tilec.passes[.x]` and `tilec.runtime[.x]` in the checkout's folders."""

    def __init__(self, folders: dict[str, str]):
        self.folders = folders  # "tilec.passes" -> ".../passes"

    def find_spec(self, fullname, path=None, target=None):
        for prefix, folder in self.folders.items():
            if fullname == prefix:
                return _package_spec(fullname, folder)
            if fullname.startswith(prefix + "."):
                base = os.path.join(folder, *fullname[len(prefix) + 1 :].split("."))
                if os.path.isfile(os.path.join(base, "__init__.py")):
                    return _package_spec(fullname, base)
                if os.path.isfile(base + ".py"):
                    return importlib.util.spec_from_file_location(fullname, base + ".py")
                return None
        return None


def _package_spec(name: str, folder: str) -> importlib.machinery.ModuleSpec | None:
    return importlib.util.spec_from_file_location(
        name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )


def bind_checkout_packages() -> None:
    """Put the finder first on `sys.meta_path` when this package lies in a source checkout
    whose `passes/` and `runtime/` exist (once per process)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(root, "pyproject.toml")):
        return
    folders = {
        f"tilec.{name}": os.path.join(root, name)
        for name in PACKAGES
        if os.path.isfile(os.path.join(root, name, "__init__.py"))
    }
    if not folders or any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _CheckoutFinder(folders))
