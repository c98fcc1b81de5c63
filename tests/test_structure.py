"""The package's shape, checked: layers, cycles, sans-IO layers, module size, import guards.

Why a test: structure decays one convenient import at a time. The layer order below is the one
docs/architecture.md draws; a module may import its own layer and the layers below it, never one
above. Imports under ``if TYPE_CHECKING`` count too: a type that points upward is a dependency
that points upward. The checks read the source with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "trio_broker"

#: lowest first; the key is the first path component under trio_broker/ (a package or a
#: module without ``.py``). Every module of the package must belong to a layer.
LAYERS: list[tuple[str, ...]] = [
    ("lazy_names",),  # a package's names imported on first use
    ("protocol",),  # the wire format, sans-IO
    ("client_core",),  # sans-IO client: builders, parsers, versions, bootstrap, structs
    ("client", "blocking_client"),  # the client core's two I/O drivers: Trio and sockets
    ("config", "metrics", "security"),  # broker configuration, metrics registry, TLS/SASL
    ("log",),  # partition logs on disk
    ("coordinator",),  # consumer groups, committed offsets, producer ids
    ("apis",),  # one handler per Kafka API, the broker state handlers see, purgatories
    ("network", "http"),  # Kafka's SocketServer in Trio; the broker's HTTP endpoints
    # lifecycle: start the parts, stop them in Kafka's order; N of them; either in a thread
    ("broker", "cluster", "loop_thread"),
    ("spark", "testing"),  # faces: the Spark stage, the pytest plugin
    ("cli", "__init__", "__main__"),  # the command line and the package's public face
]
#: layers that must stay free of I/O frameworks (h11's rule: bytes in, events out)
SANS_IO = {"protocol": ("trio", "socket", "ssl"), "client_core": ("trio", "socket")}
MAX_MODULE_LINES = 500


def _layer_of(module: str) -> int:
    head = module.split(".")[1] if "." in module else "__init__"
    for index, names in enumerate(LAYERS):
        if head in names:
            return index
    raise LookupError(head)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1] if len(parts) > 2 else [*parts[:-1], "__init__"]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(module: str) -> bool:
    path = MODULES[module]
    return path.name == "__init__.py"


def _imports(module: str) -> Iterator[tuple[str, int, ast.AST]]:
    """(imported module of this package or an outside name, line, node) for every import."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if _is_package(module) and not module.endswith("__init__") else (
        module.rsplit(".", 1)[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, node
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - node.level + 1]
                base = ".".join(base_parts)
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                yield (candidate if candidate in MODULES else target), node.lineno, node


def _internal(target: str) -> str | None:
    """The module of this package that ``target`` names (itself or its nearest parent)."""
    while target:
        if target in MODULES:
            return target
        if target == "trio_broker":
            return "trio_broker.__init__"
        target = target.rpartition(".")[0]
    return None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _, _ in _imports(module):
            if target.split(".")[0] != "trio_broker":
                continue
            internal = _internal(target)
            if internal is not None and internal != module:
                graph[module].add(internal)
    return graph


def test_every_module_has_a_layer() -> None:
    missing = []
    for module in MODULES:
        try:
            _layer_of(module)
        except LookupError:
            missing.append(module)
    assert not missing, f"modules without a layer in tests/test_structure.py: {missing}"


def test_no_import_points_to_a_higher_layer() -> None:
    upward = []
    for module, targets in _graph().items():
        for target in targets:
            if _layer_of(target) > _layer_of(module):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(upward))


def test_no_import_cycles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("layer", sorted(SANS_IO))
def test_sans_io_layers_import_no_io(layer: str) -> None:
    banned = SANS_IO[layer]
    found = []
    for module in MODULES:
        if module.split(".")[1:2] != [layer]:
            continue
        for target, line, _ in _imports(module):
            if target.split(".")[0] in banned:
                found.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} {target}")
    assert not found, f"{layer}/ must not import {banned}:\n" + "\n".join(found)


def test_modules_stay_small() -> None:
    big = {str(path.relative_to(PACKAGE.parent)): n for path in MODULES.values()
           if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


def _imports_own_module_dynamically(node: ast.AST) -> bool:
    """``importlib.import_module(f"{__name__}.x")``, ``import_module(".x", ...)`` and the like."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in ("import_module", "__import__") or not node.args:
        return False
    arg = node.args[0]
    text = ast.unparse(arg)
    return "__name__" in text or "__package__" in text or "trio_broker" in text or (
        isinstance(arg, ast.Constant) and str(arg.value).startswith("."))


def test_no_import_error_guard_around_own_modules() -> None:
    """A guarded import of our own module would let a broker start silently without a part."""
    guarded = []
    for path in MODULES.values():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try):
                continue
            catches_import_error = any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError",
                                                                "ModuleNotFoundError")
                for h in node.handlers)
            if not catches_import_error:
                continue
            for stmt in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                static = isinstance(stmt, ast.ImportFrom) and bool(
                    stmt.level or (stmt.module or "").startswith("trio_broker"))
                if static or _imports_own_module_dynamically(stmt):
                    line = getattr(stmt, "lineno", 0)
                    guarded.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert not guarded, "ImportError guards around the package's own modules: " + ", ".join(
        guarded)
