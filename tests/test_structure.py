"""The package's shape, checked: layers, cycles, sans-IO layers, code per module, import guards.

Why a test: structure decays one convenient import at a time. The layer order below is the one
docs/architecture.md draws; a module may import its own layer and the layers below it, never one
above. Imports under ``if TYPE_CHECKING`` count too: a type that points upward is a dependency
that points upward. The checks read the source with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "trio_broker"

#: lowest first; each entry names packages or modules by their dotted path under trio_broker/
#: (the longest that contains a module decides its layer). Every module must belong to a layer.
#: The tree draws the same order: the wire protocol, the client stack, the broker stack, the test
#: double, the faces.
LAYERS: list[tuple[str, ...]] = [
    ("_moved", "lazy_names"),  # old import paths kept for a release; names imported on first use
    ("protocol",),  # the wire format, sans-IO
    # the client stack: its sans-IO core, then the core's two I/O drivers (Trio and blocking
    # sockets), then the package's face (the Trio client's public names)
    ("client.core",),
    ("client.trio", "client.blocking"),
    ("client",),
    # the broker stack, lowest first
    ("broker.config", "broker.metrics", "broker.security", "broker.offload", "broker.fileio"),
    ("broker.storage",),  # partition logs on disk
    ("broker.coordinator",),  # consumer groups, committed offsets, transactions
    ("broker.server",),  # what every handler shares: state, contexts, cluster model, purgatory
    ("broker.apis",),  # one handler per Kafka API and the dispatch table
    # Kafka's SocketServer in Trio; the HTTP endpoints; metrics read from the state when scraped
    ("broker.network", "broker.http", "broker.schema_registry", "broker.rest_proxy",
     "broker.metrics.collectors"),
    ("broker.lifecycle", "broker"),  # start the parts, stop them in Kafka's order
    ("testing",),  # the test double: N brokers over one storage, faults, control, threads
    ("spark", "pytest_plugin"),  # faces: the Spark stage, the pytest plugin
    ("cli", "__init__", "__main__"),  # the command line and the package's public face
]
#: layers that must stay free of I/O frameworks (h11's rule: bytes in, events out)
SANS_IO = {"protocol": ("trio", "socket", "ssl"), "client.core": ("trio", "socket")}
#: code lines (not blank lines, comments or docstrings) a module may hold
MAX_CODE_LINES = 450
#: data tables, exempt from the count: Kafka's key tables and the message schemas
DATA_TABLES = ("broker.config.kafka_keys", "broker.config.topic_keys", "protocol.schemas")


def _layer_of(module: str) -> int:
    rest = module.split(".", 1)[1] if "." in module else "__init__"
    parts = rest.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        for index, names in enumerate(LAYERS):
            if prefix in names:
                return index
    raise LookupError(rest)


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
        if not (module + ".").startswith(f"trio_broker.{layer}."):
            continue
        for target, line, _ in _imports(module):
            if target.split(".")[0] in banned:
                found.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} {target}")
    assert not found, f"{layer} must not import {banned}:\n" + "\n".join(found)


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    tree = ast.parse(source)
    docstring_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstring_lines.update(range(body[0].lineno, (body[0].end_lineno or 0) + 1))
    comment_only = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and not tok.line[: tok.start[1]].strip():
            comment_only.add(tok.start[0])
    return sum(1 for n, line in enumerate(source.splitlines(), 1)
               if line.strip() and n not in docstring_lines and n not in comment_only)


def _is_data_table(module: str) -> bool:
    rest = module.split(".", 1)[1]
    return any(rest == t or rest.startswith(t + ".") for t in DATA_TABLES)


def test_code_lines_counts_code_only() -> None:
    source = '''"""A docstring
    of two lines."""

# a comment
x = 1  # code with a comment


def f():
    """Its docstring."""
    return x
'''
    assert code_lines(source) == 3


def test_modules_hold_a_bounded_amount_of_code() -> None:
    big = {str(path.relative_to(PACKAGE.parent)): n for module, path in MODULES.items()
           if not _is_data_table(module)
           and (n := code_lines(path.read_text())) > MAX_CODE_LINES}
    assert not big, f"modules over {MAX_CODE_LINES} code lines: {big}"


#: what a module says when it was cut by a line count rather than by its meaning
_SPLIT_FOR_SIZE = re.compile(
    r"split (?:off |out )?(?:to keep|for) (?:the )?modules? (?:small|size)"
    r"|to stay under the module size|grown past \d+ lines|(?:second|other) half of \S+ table"
    r"|moved (?:out|here) to keep \S+ (?:small|under)", re.IGNORECASE)


def test_no_module_was_split_for_its_size() -> None:
    said = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
            for path in MODULES.values()
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if _SPLIT_FOR_SIZE.search(line)]
    assert not said, "modules cut by a line count, not by meaning:\n" + "\n".join(said)


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


#: the compactor's own modules; the rest of storage must not depend on them (a log serves
#: without a cleaner, and finishing a segment swap is storage's own job: ``segment_swap.py``)
_COMPACTOR = ("trio_broker.broker.storage.cleaner", "trio_broker.broker.storage.cleaner_manager")


def test_storage_does_not_import_the_compactor() -> None:
    found = []
    for module in MODULES:
        if not module.startswith("trio_broker.broker.storage.") or module in _COMPACTOR:
            continue
        for target, line, _ in _imports(module):
            if _internal(target) in _COMPACTOR:
                found.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} {target}")
    assert not found, "storage modules importing the compactor:\n" + "\n".join(found)


#: ``random``'s own classes; everything else it exports draws from the application's generator
_RANDOM_CLASSES = frozenset({"Random", "SystemRandom"})


def test_no_module_draws_from_the_global_random() -> None:
    """The global ``random`` state is the application's: test_application_random.py."""
    found = []
    for path in MODULES.values():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            global_draw = (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                           and node.value.id == "random" and node.attr not in _RANDOM_CLASSES)
            imported_draw = (isinstance(node, ast.ImportFrom) and node.module == "random"
                             and any(a.name not in _RANDOM_CLASSES for a in node.names))
            if global_draw or imported_draw:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}")
    assert not found, "the global random drawn from at " + ", ".join(found)
