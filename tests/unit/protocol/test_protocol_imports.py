"""tidemq.protocol stays sans-IO: no module under it imports networking or concurrency."""

from __future__ import annotations

import ast
from pathlib import Path

import tidemq.protocol

FORBIDDEN = {"socket", "asyncio", "selectors", "threading", "ssl"}
PROTOCOL_DIR = Path(tidemq.protocol.__file__).parent


def imported_top_level_modules(source: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"), filename=str(source))):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


def test_protocol_modules_import_no_io() -> None:
    sources = sorted(PROTOCOL_DIR.rglob("*.py"))
    assert {"frame.py", "command.py", "codes.py", "headers.py"} <= {path.name for path in sources}
    offenders = {
        str(path.relative_to(PROTOCOL_DIR)): sorted(imported_top_level_modules(path) & FORBIDDEN)
        for path in sources
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_checker_sees_forbidden_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import asyncio.events\nfrom socket import socket\nimport json\n")
    assert imported_top_level_modules(sample) & FORBIDDEN == {"asyncio", "socket"}
