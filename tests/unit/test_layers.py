"""The layer table: no package imports one above it, no two modules import each other.

Read bottom-up, each row may import the rows below it and its own package.
Imports under TYPE_CHECKING count: a type that needs a higher layer is a
dependency all the same.

    layer  packages
    0      common
    1      record            (the stored-record layout and its codecs, compiled and pure)
    2      protocol, filter
    3      store, transport, acl (who may do what: signatures, policies)
    4      timer, namesrv, client, ha (replication: the HA port, a slave's copy, SYNC_MASTER waits),
           controller (RocketMQ 5's: elects a master among the in-sync replicas; the
           name server serves it on its port, wired in by the cli)
    5      broker
    6      grpc, web         (web: /metrics, the JSON API and the dashboard over HTTP)
    7      server            (the composition root: broker + gRPC in one process)
    8      spark, cli
    9      testing           (shipped test helpers: they drive spark jobs too)
    10     tidemq            (the package's own __init__: the public API)

`protocol` also stays sans-IO (tests/unit/protocol/test_protocol_imports.py).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import tidemq

LAYERS: dict[str, int] = {
    "common": 0,
    "record": 1,
    "protocol": 2,
    "filter": 2,
    "store": 3,
    "transport": 3,
    "acl": 3,
    "timer": 4,
    "namesrv": 4,
    "client": 4,
    "ha": 4,
    "controller": 4,
    "broker": 5,
    "grpc": 6,
    "web": 6,
    "server": 7,
    "spark": 8,
    "cli": 8,
    "testing": 9,
    "__init__": 10,
}
ROOT = Path(tidemq.__file__).parent


def module_name(path: Path) -> str:
    parts = ("tidemq", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every tidemq module or package `path` imports, absolute or relative."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module == "tidemq" or module.startswith("tidemq.")}


def top_package(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def all_sources() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def test_every_package_has_a_layer() -> None:
    packages = {top_package(name) for name in all_sources()}
    assert packages == set(LAYERS)


def test_no_package_imports_one_above_it() -> None:
    offenders: list[str] = []
    sources = all_sources()
    for name, path in sources.items():
        own = top_package(name)
        for target in imports_of(path) & sources.keys():  # modules, not imported names
            other = top_package(target)
            if other != own and LAYERS[other] >= LAYERS[own]:
                offenders.append(f"{name} (layer {LAYERS[own]}) imports {target}")
    assert offenders == []


def test_no_import_cycles_between_modules() -> None:
    sources = all_sources()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in sources.items():
        graph[name] = {t for t in imports_of(path) if t in sources and t != name}
    cycles = strongly_connected(graph)
    # a package's __init__ re-exporting its own modules is no cycle of layers
    real = [c for c in cycles if not any(sources[m].name == "__init__.py" for m in c)]
    assert real == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or around a loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checkers_see_violations(tmp_path: Path) -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert top_package("tidemq.broker.service") == "broker"
    assert top_package("tidemq") == "__init__"
    sample = ROOT / "broker" / "service.py"
    assert "tidemq.store.api" in imports_of(sample) or any(
        target.startswith("tidemq.store") for target in imports_of(sample)
    )
