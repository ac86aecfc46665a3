"""The module-level call graph of one call into sgemm_cube, the two rules a call must follow, and the import rules.

The design rule "following an operand from ``sgemm_cube.matmul`` to the
kernel, no module is entered twice", made checkable:

* **One way** (:func:`cycles`): no module calls, directly or through other
  modules, back into a module that called it.  A call goes down the layers
  (``api -> product -> backends.cpu -> cpu_fallback.guard -> ...``) and
  returns; it never comes back up (the old ``api -> plan -> api`` and
  ``_autograd -> api`` round trips).
* **One entry per module** (:func:`second_entries`): every module that
  receives operand data (an array or tensor argument) receives it from one
  module only.  A loop that calls the same module again from the same place
  (one K slab after another) is the same entry.

Calls are attributed to modules by each frame's ``__name__``; a frame whose
caller is outside sgemm_cube (torch's dispatcher calling the operator's
kernel) is attributed to its nearest sgemm_cube caller, so a round trip
through torch counts.

Imports (:func:`import_graph`, read from the source) follow the same rule
twice: no circle between files (:func:`cycles`), and none between the
subpackages (:func:`package_cycles`: ``backends``, ``cli``, ``tuning``,
``cpu_fallback``).  The second catches what the first cannot: importing
``sgemm_cube.cli.x`` runs ``sgemm_cube/cli/__init__.py`` first, so
``cli/__init__ -> tuning.cli -> cli.x`` would be a loop at run time although
no file imports itself.  setup.py's ``package_dir`` (``tuning/`` installs as
``sgemm_cube.tuning``) hides such loops from readers, who see two folders.
"""
from __future__ import annotations

import ast
import collections
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Source folders and the package names they install as.
PACKAGES = {"sgemm_cube": "sgemm_cube", "cpu_fallback": "sgemm_cube.cpu_fallback",
            "tuning": "sgemm_cube.tuning"}


def _is_data(value) -> bool:
    """Operand data: an array or tensor of more than one element."""
    size = getattr(value, "size", None)
    if callable(size):  # torch.Tensor.size() is a method
        numel = getattr(value, "numel", None)
        return callable(numel) and numel() > 1
    return isinstance(size, int) and size > 1 and hasattr(value, "ndim")


def _ours(frame):
    name = frame.f_globals.get("__name__", "")
    return name if name == "sgemm_cube" or name.startswith("sgemm_cube.") else None


class CallGraph:
    """Edges ``caller module -> callee module`` seen while running ``fn()``, with the operand-carrying ones."""

    def __init__(self, fn):
        self.edges = collections.Counter()
        self.data_edges = collections.Counter()  # (caller, callee, function name)

        def profile(frame, event, arg):
            if event != "call":
                return
            callee = _ours(frame)
            if callee is None:
                return
            back = frame.f_back
            while back is not None and _ours(back) is None:
                back = back.f_back
            caller = None if back is None else _ours(back)
            if caller is None or caller == callee:
                return
            self.edges[caller, callee] += 1
            code = frame.f_code
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
            if any(_is_data(frame.f_locals.get(n)) for n in names):
                self.data_edges[caller, callee, code.co_name] += 1

        old = sys.getprofile()
        sys.setprofile(profile)
        try:
            fn()
        finally:
            sys.setprofile(old)

    def describe(self) -> str:
        short = lambda m: m.replace("sgemm_cube.", "")  # noqa: E731
        return "\n".join(f"{short(c):28s} -> {short(m):28s} {f}" for c, m, f in sorted(self.data_edges))


def cycles(edges) -> list[list[str]]:
    """Strongly connected groups of more than one module in the graph ``edges`` (pairs)."""
    graph = collections.defaultdict(set)
    for caller, callee in edges:
        graph[caller].add(callee)
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return groups


def second_entries(data_edges) -> dict[str, set[str]]:
    """Modules that receive operand data from more than one module: ``{module: {callers}}``."""
    callers = collections.defaultdict(set)
    for caller, callee, _ in data_edges:
        callers[callee].add(caller)
    return {m: c for m, c in callers.items() if len(c) > 1}


#: Imports that close a loop between subpackages, as (importing module, imported package) pairs, exempted
#: by :func:`package_cycles` until they are removed; the test of this list fails while a pair names an
#: import that no longer exists.  Empty: issue 32's "tilings as data" removed the last one
#: (``backends.npu -> tuning.pipeline -> backends.npu_schedule -> tuning.hardware``).
KNOWN_PACKAGE_LOOPS = frozenset()

#: The packages the runtime may not import: the tuner (its model runs for seconds; the runtime reads
#: what it wrote, ``sgemm_cube/backends/npu_tilings/``).
TUNER = "sgemm_cube.tuning"
#: The parts of the package that are not the runtime: the tuner itself and the command line, which
#: drives it.
NOT_RUNTIME = ("sgemm_cube.tuning", "sgemm_cube.cli")


def runtime_imports_of_tuner(edges) -> list[tuple[str, str]]:
    """Imports ``(importer, imported)`` of :data:`TUNER` by a runtime module (every ``sgemm_cube`` module
    outside :data:`NOT_RUNTIME`), lazy imports included."""
    def within(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    return sorted((a, b) for a, b in edges
                  if within(b, TUNER) and within(a, "sgemm_cube") and not any(within(a, p) for p in NOT_RUNTIME))


def modules(root: pathlib.Path = ROOT, packages: dict = PACKAGES) -> dict[str, tuple[pathlib.Path, bool]]:
    """``{module name: (source file, is a package)}`` of the source folders ``packages`` under ``root``."""
    found = {}
    for folder, package in packages.items():
        for path in (root / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(root / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = (path, path.name == "__init__.py")
    return found


def package_of(module: str, packages: set[str], root: str = "sgemm_cube") -> str | None:
    """The subpackage of ``root`` that holds ``module`` (its first level: ``sgemm_cube.backends`` for
    ``sgemm_cube.backends.cuda.launch``), or ``None`` for the root package's own modules (``api``,
    ``plan``, ...), which are checked as files."""
    top = ".".join(module.split(".")[:2]) if module.startswith(root + ".") else None
    return top if top in packages else None


def package_cycles(edges, packages: set[str], known=frozenset(), root: str = "sgemm_cube") -> list[list[str]]:
    """Circles between subpackages (:func:`package_of`) in the module graph ``edges``.

    ``known``: (importing module, imported package) pairs left out (:data:`KNOWN_PACKAGE_LOOPS`).
    """
    between = set()
    for importer, imported in edges:
        pa, pb = package_of(importer, packages, root), package_of(imported, packages, root)
        if pa and pb and pa != pb and (importer, pb) not in known:
            between.add((pa, pb))
    return cycles(between)


def import_graph(root: pathlib.Path = ROOT, packages: dict = PACKAGES) -> set[tuple[str, str]]:
    """Edges ``importer -> imported`` among the package's modules, lazy (in-function) imports included.

    Read from the source with :mod:`ast`; ``root`` and ``packages`` name another tree (the tests plant loops in one).
    """
    known = modules(root, packages)
    edges = set()
    for name, (path, is_package) in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = name.split(".")[: None if is_package else -1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add((name, target))
    return edges
