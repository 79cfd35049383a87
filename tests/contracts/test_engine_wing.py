"""The walls of the engine wing (issue 38, "One engine, one door").

The engine wing (the request, the scheduler, the KV cache and its transfer, the model and
its attention, the kernels, the trace) runs a request and reports what happened as facts on
the trace. The lab (P/D orchestration, the simulator, the views, the CLI, the tools, the
exercises, the demo) runs the engine, prices its events and phrases them. These tests read
every import of every module with ``ast`` (module level, inside functions, under
``TYPE_CHECKING``, and ``"pdlab.x.y"`` strings handed to ``importlib.import_module``) and:

* fail on an engine-wing import that reaches the lab;
* fail on an import circle among pdlab modules that is neither type-only, known nor
  declared in README.md ("The walls");
* fail on an arrow that runs back up the floors below that is neither known nor declared.

The floors, lowest first (a module may import its own floor and the floors below it):

0. ``pdlab.catalog``: the message catalog, the one floor both wings may read;
1. the engine wing (:data:`ENGINE_WING`);
2. ``pdlab.disagg``: runs engines in pairs (P/D);
3. ``pdlab.sim``: prices traces, steps and designs;
4. ``pdlab.demo``: one P/D run packaged for the views;
5. ``pdlab.ui``: the views;
6. ``pdlab.exercises`` and ``pdlab.tools``;
7. ``pdlab.cli``: the commands.

The package root (``pdlab/__init__.py``, the door) and ``pdlab/__main__.py`` are on no
floor: the root names what a learner types first, each resolved to the module that holds it.
A module importing its own package (``pdlab.engine.config.model`` reading
``pdlab.engine.config``) is not
counted as a circle: the package's ``__init__`` re-exports it.

What other slices of issue 38 are removing is listed in ``KNOWN_*`` below, printed by each
test; an entry that no longer occurs fails the test, so the list only shrinks. What stays,
with its reason, is in ``DECLARED_*`` and in the README.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pdlab

ROOT = Path(__file__).resolve().parents[2]

ENGINE_WING = (
    "pdlab.engine",  # everything that mirrors vLLM, laid out as vLLM is
    "pdlab.errors",  # the exceptions the engine raises, each with a catalog key
    "pdlab.kernels",  # the Triton kernels and their torch twins (kernels/)
    "pdlab.attention",  # the naive oracle (pdlab.attention.reference)
)
LAB = (
    "pdlab.disagg",
    "pdlab.sim",
    "pdlab.demo",
    "pdlab.ui",
    "pdlab.exercises",
    "pdlab.tools",
    "pdlab.cli",
)
FLOORS = (
    ("pdlab.catalog",),
    ENGINE_WING,
    ("pdlab.disagg",),
    ("pdlab.sim",),
    ("pdlab.demo",),
    ("pdlab.ui",),
    ("pdlab.exercises", "pdlab.tools"),
    ("pdlab.cli",),
)

# Removed by other slices of issue 38 (each names whose room it is in).
KNOWN_SENTENCES: set[tuple[str, str]] = set()  # engine-wing modules reading the catalog
# The one engine module that reads the catalog by design: an exception carries a catalog key
# and its English is the catalog's (issue 38, "errors are raised with a key and values").
MESSAGE_DOOR = ("pdlab.errors", "pdlab.catalog")
KNOWN_CIRCLES: set[frozenset[str]] = set()  # circles with a runtime arrow
KNOWN_UP: set[tuple[str, str]] = set()  # arrows running back up the floors
# Declared in README.md ("The walls"), each with its reason there.
DECLARED_CIRCLES = {
    frozenset(
        {
            "pdlab.engine.model_executor.models.deepseek_v2",
            "pdlab.engine.model_executor.models.deepseek_mtp",
        }
    )
}
DECLARED_UP = {("pdlab.sim.profiles", "pdlab.tools.measure")}
MAX_CIRCLES = 2  # besides the known ones; each type-only or declared
MAX_UP = 2  # besides the known ones; each declared


def _module_files() -> dict[str, tuple[Path, bool]]:
    """Every pdlab module: its name, its file and whether it is a package."""
    found: dict[str, tuple[Path, bool]] = {}
    for base, prefix in ((ROOT / "pdlab", "pdlab"), (ROOT / "kernels", "pdlab.kernels")):
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if prefix == "pdlab" and parts[0] == "kernels":  # an install's copy, if any
                continue
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts.pop()
            found[".".join([prefix, *parts])] = (path, is_pkg)
    return found


MODULES = _module_files()


def _resolve(name: str) -> str:
    """The pdlab module ``name`` loads: itself, or the nearest package above it (a name
    imported from a package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, node: ast.AST) -> list[str]:
    """The pdlab modules one import statement (or one module-name string) names."""
    path, is_pkg = MODULES[module]
    package = module if is_pkg else module.rpartition(".")[0]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "pdlab"]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
        if base.split(".")[0] != "pdlab":
            return []
        out = []
        for alias in node.names:
            full = f"{base}.{alias.name}"
            if full in MODULES:
                out.append(full)
            elif base == "pdlab" and alias.name in pdlab._EXPORTS:
                out.append(pdlab._EXPORTS[alias.name])
            else:
                out.append(base)
        return out
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        value = node.value
        if value.startswith("pdlab.") and all(p.isidentifier() for p in value.split(".")):
            return [value]
    return []


@functools.cache
def imports_of(module: str) -> tuple[tuple[str, int, str], ...]:
    """``(target, line, how)`` for every pdlab module ``module`` imports; ``how`` is "top"
    (at import), "lazy" (inside a function), "type" (under ``TYPE_CHECKING``) or "string"
    (a module name in a string, as ``importlib.import_module`` takes it)."""
    path, _ = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, how: str) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "type")
            for child in node.orelse:
                visit(child, how)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and how == "top":
            how = "lazy"
        kind = "string" if isinstance(node, ast.Constant) else how
        for target in _targets(module, node):
            resolved = _resolve(target)
            if resolved and resolved != "pdlab":
                found.append((resolved, node.lineno, kind))
        for child in ast.iter_child_nodes(node):
            visit(child, how)

    visit(tree, "top")
    return tuple(found)


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _floor(module: str) -> int | None:
    for i, packages in enumerate(FLOORS):
        if _within(module, packages):
            return i
    return None


def _check_known(kind: str, known: set, found: set) -> None:
    print(f"known {kind} (other slices of issue 38 remove them):")
    for entry in sorted(known, key=sorted):
        print("   ", " <-> ".join(sorted(entry)) if isinstance(entry, frozenset) else entry)
    stale = known - found
    assert not stale, f"known {kind} no longer found, remove them from the list: {stale}"


def test_every_module_is_on_a_side() -> None:
    """Every module is in the engine wing, the lab, the catalog or the door: a new package
    gets a side before it gets code."""
    sides = (*ENGINE_WING, *LAB, "pdlab.catalog")
    door = {"pdlab", "pdlab.__main__"}
    loose = [m for m in MODULES if m not in door and not _within(m, sides)]
    assert not loose, f"modules on no side of the wall (add them to a floor): {loose}"
    assert {p for f in FLOORS for p in f} == set(sides)


def test_the_reader_sees_every_kind_of_import() -> None:
    """The reader itself: a lazy import, a type-only one and a module-name string are each
    found where pdlab has them (so the wall below cannot pass by reading too little)."""
    hows = {how for m in MODULES for _, _, how in imports_of(m)}
    assert hows == {"top", "lazy", "type", "string"}
    root = dict(((t, how) for t, _, how in imports_of("pdlab")))
    assert root["pdlab.disagg.pair"] == "string"  # PDPair, loaded on first use


def test_engine_wing_imports_no_lab() -> None:
    crossings = []
    sentences = set()
    for module in MODULES:
        if not _within(module, ENGINE_WING):
            continue
        for target, line, how in imports_of(module):
            if _within(target, LAB):
                crossings.append(f"{MODULES[module][0].relative_to(ROOT)}:{line} ({how}) {target}")
            elif _within(target, ("pdlab.catalog",)):
                sentences.add((module, "pdlab.catalog"))
    assert not crossings, "the engine wing imports the lab:\n" + "\n".join(crossings)
    unknown = sentences - KNOWN_SENTENCES - {MESSAGE_DOOR}
    assert not unknown, f"engine modules reading the catalog (report facts instead): {unknown}"
    _check_known("catalog readers in the engine", KNOWN_SENTENCES, sentences)


def _graph(hows: set[str]) -> dict[str, set[str]]:
    """Module -> the modules it imports by one of ``hows``, less its own packages."""
    return {
        m: {
            t
            for t, _, how in imports_of(m)
            if how in hows and t != m and not m.startswith(t + ".") and t in MODULES
        }
        for m in MODULES
        if m not in ("pdlab", "pdlab.__main__")
    }


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _readme_walls() -> str:
    """The README's section on the walls, where each declared exception gives its reason."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("### The walls")
    end = readme.find("\n#", start + 1)
    return readme[start : end if end > 0 else None]


def _declared_in_readme(modules: set[str] | frozenset[str]) -> None:
    walls = _readme_walls()
    for module in modules:
        path = MODULES[module][0].relative_to(ROOT)
        short = str(path.relative_to("pdlab")) if path.parts[0] == "pdlab" else str(path)
        assert f"`{short}`" in walls, f"README.md's 'The walls' does not name `{short}`"


def test_import_circles() -> None:
    """Every circle at run time is known (another slice removes it) or declared in the
    README; besides the known ones at most :data:`MAX_CIRCLES` circles, type-only (gone
    when the ``TYPE_CHECKING`` imports are left out) or declared."""
    every = _circles(_graph({"top", "lazy", "type", "string"}))
    runtime = set(_circles(_graph({"top", "lazy", "string"})))
    for circle in every:
        print("circle:", " <-> ".join(sorted(circle)))
    _check_known("circles", KNOWN_CIRCLES, runtime)
    assert DECLARED_CIRCLES <= runtime, f"declared circles gone: {DECLARED_CIRCLES - runtime}"
    bad = [sorted(c) for c in runtime - KNOWN_CIRCLES - DECLARED_CIRCLES]
    assert not bad, f"import circles at run time (lazy imports included): {bad}"
    for circle in DECLARED_CIRCLES:
        _declared_in_readme(circle)
    others = [c for c in every if not any(c >= k for k in KNOWN_CIRCLES)]
    assert len(others) <= MAX_CIRCLES, f"more than {MAX_CIRCLES} circles: {others}"


def test_arrows_running_back_up() -> None:
    """An import from a floor to a higher one is an arrow back up: besides the known ones,
    at most :data:`MAX_UP`, each declared in the README."""
    up = set()
    where = {}
    for module in MODULES:
        here = _floor(module)
        if here is None:
            continue
        for target, line, how in imports_of(module):
            there = _floor(target)
            if there is not None and there > here:
                up.add((module, target))
                where[(module, target)] = f"{MODULES[module][0].relative_to(ROOT)}:{line} ({how})"
    for arrow in sorted(up):
        print("up:", where[arrow], " -> ".join(arrow))
    _check_known("arrows back up", KNOWN_UP, up)
    assert DECLARED_UP <= up, f"declared arrows gone: {DECLARED_UP - up}"
    others = sorted(up - KNOWN_UP - DECLARED_UP)
    assert not others, "arrows back up:\n" + "\n".join(
        f"{where[a]} {a[0]} -> {a[1]}" for a in others
    )
    assert len(DECLARED_UP) <= MAX_UP
    for arrow in DECLARED_UP:
        _declared_in_readme(set(arrow))
