"""graphbench's import graph, read from the source with `ast` (nothing is imported): no circles, no
module reaching into another's underscore names, the kernels room importing nothing of the engine,
ladders and reports importing no torch when they load.

Every `import` and `from ... import` counts, at module level and inside functions alike (a function-level
import is a dependency too: it only moves the circle to the first call), except those under
`if TYPE_CHECKING:`, which never run. An edge goes to the module named (`from a.b import c` goes to a.b.c
when that is a module, else to a.b); relative imports are resolved against the importer's package.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "src" / "graphbench"
KERNELS = "graphbench.runner.kernels"
# What the kernels room may import besides itself, the standard library, torch and triton: the switch
# registry, the environment module and the error type, which import nothing but the standard library and
# each other (checked below): through them the kernels read their GRAPHBENCH_* switches and TRITON_*.
KERNELS_MAY_IMPORT = ("graphbench.env", "graphbench.errors")


@dataclass
class Import:
    importer: str
    target: str  # the module imported (a graphbench module, or the name as written for others)
    names: tuple[str, ...]  # `from target import names` (empty for `import target`)
    line: int
    module_level: bool  # runs when the importer loads (not inside a function)


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: list[Import] = field(default_factory=list)
    private_uses: list[tuple[str, int]] = field(default_factory=list)  # ("a.b._x", line)


def module_name(path: Path) -> tuple[str, bool]:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _ImportVisitor(ast.NodeVisitor):
    """Collects a module's imports (and whether each runs at load), and its `module._private` uses."""

    def __init__(self, module: Module, modules: set[str]):
        self.module, self.modules = module, modules
        self.depth = 0  # inside a function
        self.bound: dict[str, str] = {}  # local name -> the graphbench module it is bound to

    def _package(self) -> str:
        return self.module.name if self.module.is_package else self.module.name.rpartition(".")[0]

    def _add(self, target: str, names: tuple[str, ...], node: ast.AST) -> None:
        self.module.imports.append(Import(self.module.name, target, names, node.lineno, self.depth == 0))

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, (), node)
            if alias.asname:
                self.bound[alias.asname] = alias.name
            else:
                head = alias.name.partition(".")[0]
                self.bound[head] = head
            if any(is_private(part) for part in alias.name.split(".")[1:]) and alias.name in self.modules:
                self.module.private_uses.append((alias.name, node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self._package()
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in self.modules:
                self._add(submodule, (), node)
                self.bound[alias.asname or alias.name] = submodule
            else:
                self._add(source, (alias.name,), node)
            if source.startswith("graphbench") and source != self.module.name and is_private(alias.name):
                self.module.private_uses.append((submodule, node.lineno))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain: list[str] = []
        base: ast.expr = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in self.bound:
            resolved = self.bound[base.id]
            for attr in reversed(chain):
                if f"{resolved}.{attr}" in self.modules:
                    resolved = f"{resolved}.{attr}"
                    continue
                if resolved.startswith("graphbench") and resolved != self.module.name and is_private(attr):
                    self.module.private_uses.append((f"{resolved}.{attr}", node.lineno))
                break
            return  # the chain is read whole: its inner Attribute nodes are not visited again
        self.generic_visit(node)


def read_modules() -> dict[str, Module]:
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        name, is_package = module_name(path)
        found[name] = Module(name, path, is_package)
    names = set(found)
    for module in found.values():
        _ImportVisitor(module, names).visit(ast.parse(module.path.read_text(), str(module.path)))
    return found


def internal_edges(modules: dict[str, Module], module_level_only: bool = False) -> dict[str, set[str]]:
    """importer -> the graphbench modules it imports (itself excluded)."""
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for module in modules.values():
        for imp in module.imports:
            if imp.target in modules and imp.target != module.name and (imp.module_level or not module_level_only):
                edges[module.name].add(imp.target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) through each strongly connected component of more than one module
    (Tarjan's algorithm, iterative; components in order of their first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return [_cycle_in(component, edges) for component in sorted(components)]


def _cycle_in(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first within the component)."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, node, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {component}")


def loaded_with(name: str, modules: dict[str, Module]) -> set[str]:
    """The graphbench modules that run when `name` is imported: its packages' __init__ and, transitively,
    every module-level import of each."""
    edges = internal_edges(modules, module_level_only=True)
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        parts = current.split(".")
        for step in [".".join(parts[:i]) for i in range(1, len(parts))] + [current] + sorted(edges.get(current, ())):
            if step in modules and step not in seen:
                seen.add(step)
                todo.append(step)
    return seen


def _top(name: str) -> str:
    return name.partition(".")[0]


def kernels_outside_imports(modules: dict[str, Module]) -> list[str]:
    """The kernels room's imports of anything but itself, torch, triton, the standard library and
    KERNELS_MAY_IMPORT."""
    allowed_tops = {"torch", "triton", "__future__", *sys.stdlib_module_names}
    return [f"{imp.importer}:{imp.line} imports {imp.target}"
            for module in modules.values() if module.name == KERNELS or module.name.startswith(KERNELS + ".")
            for imp in module.imports
            if not (imp.target == KERNELS or imp.target.startswith(KERNELS + ".") or imp.target in KERNELS_MAY_IMPORT
                    or (_top(imp.target) != "graphbench" and _top(imp.target) in allowed_tops))]


def torch_when_loaded(names: list[str], modules: dict[str, Module]) -> list[str]:
    """For each module named: the module-level torch imports of what loads with it."""
    return [f"{name} loads {loaded}, which imports {imp.target} (line {imp.line})"
            for name in sorted(names) for loaded in sorted(loaded_with(name, modules))
            for imp in modules[loaded].imports if imp.module_level and _top(imp.target) == "torch"]


def _made_up(sources: dict[str, str], tmp_path: Path) -> dict[str, Module]:
    """Modules read from source text, as read_modules reads the package's files."""
    made = {name: Module(name, tmp_path / f"{name}.py", False) for name in sources}
    for name, text in sources.items():
        _ImportVisitor(made[name], set(made)).visit(ast.parse(text))
    return made


MODULES = read_modules()


def test_the_walk_sees_the_package():
    assert len(MODULES) > 100 and {"graphbench.cli.main", "graphbench.runner.engine", KERNELS} <= set(MODULES)
    edges = internal_edges(MODULES)
    assert "graphbench.runner.model_runner" in edges["graphbench.runner.engine"]  # a module-level import
    assert f"{KERNELS}.argmax" in edges["graphbench.runner.sampler"]  # a function-level import


def test_the_checks_fail_on_what_they_forbid(tmp_path):
    """Each check below fails when broken: made-up modules with a circle, private names reached into,
    a kernel importing the engine, a torch-free room loading torch through another module."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    made = _made_up({
        "graphbench.x": "",
        "graphbench.x.z": "import torch\n_inner = 1\n",
        "graphbench.x.y": ("from graphbench.x import z\nfrom .z import _hidden\nimport graphbench.x.z\n"
                           "def f():\n    import graphbench.x.w\n    return z._inner + z.public + graphbench.x.z._deep\n"),
        "graphbench.x.w": "from graphbench.x.y import f\n",
    }, tmp_path)
    assert made["graphbench.x.y"].private_uses == [
        ("graphbench.x.z._hidden", 2), ("graphbench.x.z._inner", 6), ("graphbench.x.z._deep", 6)]
    assert cycles(internal_edges(made)) == [["graphbench.x.w", "graphbench.x.y", "graphbench.x.w"]]
    assert cycles(internal_edges(made, module_level_only=True)) == []  # y imports w inside a function
    assert torch_when_loaded(["graphbench.x.y"], made) == [
        "graphbench.x.y loads graphbench.x.z, which imports torch (line 1)"]
    kernel = _made_up({f"{KERNELS}.k": "import os, triton\nfrom graphbench.runner.engine import Engine\n"}, tmp_path)
    assert kernels_outside_imports(kernel) == [f"{KERNELS}.k:2 imports graphbench.runner.engine"]


def test_no_import_cycles():
    found = cycles(internal_edges(MODULES))
    assert found == [], "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_no_module_imports_another_modules_underscore_names():
    found = [f"{module.name}:{line} uses {name}" for module in MODULES.values()
             for name, line in module.private_uses]
    assert found == [], "imports of another module's private names:\n" + "\n".join(found)


def test_the_kernels_room_imports_only_itself_torch_triton_and_the_standard_library():
    found = kernels_outside_imports(MODULES)
    assert found == [], "the kernels room imports outside itself:\n" + "\n".join(found)
    assert len([name for name in MODULES if name.startswith(KERNELS + ".")]) >= 9
    for name in KERNELS_MAY_IMPORT:  # leaves of the standard library (and of each other)
        outside = [imp.target for imp in MODULES[name].imports if _top(imp.target) not in sys.stdlib_module_names
                   and imp.target != "__future__" and imp.target not in KERNELS_MAY_IMPORT
                   and not (imp.target == "graphbench" and set(imp.names) <= {"env", "errors"})]
        assert outside == [], f"{name} imports {outside}"


def test_ladders_and_reports_import_no_torch_when_they_load():
    rooms = [name for name in MODULES if name.split(".")[1:2] in (["ladders"], ["reports"])]
    assert len(rooms) > 30
    found = torch_when_loaded(rooms, MODULES)
    assert found == [], "\n".join(found)


def test_tune_and_cache_import_no_torch_when_they_load():
    """`graphbench tune` replays request traces through the scheduler, `cache diff` resolves configs:
    both paths stay torch-free."""
    found = torch_when_loaded(["graphbench.cli.tune", "graphbench.tuning.trace_replay", "graphbench.runner.scheduler",
                               "graphbench.cli.cache", "graphbench.runner.compile.cache_diff"], MODULES)
    assert found == [], "\n".join(found)
