"""Run a function right after a module is imported, or now if it already is.

sgemm_cube registers things with torch (the ``torch.ops.sgemm_cube``
operator, DTensor's sharding rules) without importing torch itself, so that
``import sgemm_cube`` stays light for NumPy users: :func:`after_import`
calls the registration at once where the module is loaded, else right after
whoever imports it first has executed it (a finder at the front of
:data:`sys.meta_path` wraps the module's loader, once).
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys

__all__ = ["after_import"]


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Calls ``callback()`` right after module ``name`` is executed (wraps its loader)."""

    def __init__(self, name: str, callback):
        self.name, self.callback, self._loader = name, callback, None

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # find the real spec with the other finders, once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self.callback()


def after_import(name: str, callback) -> None:
    """Call ``callback()`` now if module ``name`` is imported, else right after it is (once)."""
    if sys.modules.get(name) is not None:
        callback()
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))
