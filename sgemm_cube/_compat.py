"""Old import names kept for one release: ``cpu_fallback`` and ``tuning`` are now
``sgemm_cube.cpu_fallback`` and ``sgemm_cube.tuning``.

:func:`alias_package` makes the old top-level name and every ``old.sub``
module the *same module objects* as the new ones (no second copy, so classes
and registries stay one), after a :class:`DeprecationWarning` naming the new
import.  It is called from the old names' ``__init__`` (the shims that
``pip install`` puts at the old names, and the source folders themselves when
a checkout is on ``sys.path``).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["alias_package", "REMOVED_IN"]

REMOVED_IN = "0.2"
_ALIASES: dict[str, str] = {}


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``old.sub`` to the already-imported or importable ``new.sub``."""

    def find_spec(self, fullname, path=None, target=None):
        for old, new in _ALIASES.items():
            if fullname.startswith(old + "."):
                return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        for old, new in _ALIASES.items():
            if spec.name.startswith(old + "."):
                return importlib.import_module(new + spec.name[len(old):])
        raise ImportError(spec.name)  # pragma: no cover - find_spec only accepts aliased names

    def exec_module(self, module):  # the new module ran already
        pass


_FINDER = _AliasFinder()


def alias_package(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Make ``import old`` and ``import old.x`` give ``new`` and ``new.x``, with a DeprecationWarning."""
    warnings.warn(f"'{old}' is now '{new}': import {new} (the old name goes away in sgemm_cube {REMOVED_IN})",
                  DeprecationWarning, stacklevel=stacklevel)
    _ALIASES[old] = new
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    module = importlib.import_module(new)
    sys.modules[old] = module
    for name, mod in list(sys.modules.items()):  # submodules imported before the alias
        if name.startswith(new + "."):
            sys.modules.setdefault(old + name[len(new):], mod)
