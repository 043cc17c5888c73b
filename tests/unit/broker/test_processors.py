"""One typed path: every request code is served by exactly one processor, each
processor is built from its own collaborators (never the whole service), no
processor module imports another, and no table is built by looking names up."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import tidemq.broker.processors as processors_package
from tidemq.broker import handlers as handlers_module
from tidemq.broker.assembly import ALL_FEATURES, BrokerCore
from tidemq.broker.handlers import HANDLED_CODES, dispatch_table
from tidemq.broker.processors.admin import AdminProcessor
from tidemq.broker.processors.client import ClientProcessor
from tidemq.broker.processors.pop import PopProcessor
from tidemq.broker.processors.pull import PullProcessor
from tidemq.broker.processors.send import SendProcessor
from tidemq.broker.processors.transaction import TransactionProcessor
from tidemq.grpc import servicer as servicer_module
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing.cores import memory_core

PACKAGE_DIR = Path(processors_package.__file__).parent
PROCESSOR_MODULES = sorted(p for p in PACKAGE_DIR.glob("*.py") if p.name != "__init__.py")
PROCESSOR_CLASSES = (
    SendProcessor,
    PullProcessor,
    ClientProcessor,
    AdminProcessor,
    PopProcessor,
    TransactionProcessor,
)


@pytest.fixture
def core(tmp_path: Path) -> BrokerCore:
    broker = memory_core(tmp_path, ALL_FEATURES)[0]
    return broker


class _Connection:
    id = 1
    remote = ("127.0.0.1", 40000)
    closed = False

    def send(self, command: object) -> None:
        pass

    def send_oneway(self, command: object) -> None:
        pass

    def close(self) -> None:
        pass


def test_every_handled_code_is_served_by_exactly_one_processor(core: BrokerCore) -> None:
    served: dict[int, list[str]] = {}
    for processor in core.processors():
        for code in processor.handlers():
            served.setdefault(int(code), []).append(type(processor).__name__)
    assert set(served) == HANDLED_CODES
    assert {code: owners for code, owners in served.items() if len(owners) != 1} == {}
    assert {type(p) for p in core.processors()} == set(PROCESSOR_CLASSES)
    assert core.dispatch_table().keys() == HANDLED_CODES


def test_a_handler_is_a_method_of_its_own_processor(core: BrokerCore) -> None:
    for processor in core.processors():
        for code, handler in processor.handlers().items():
            assert getattr(handler, "__self__", None) is processor, (code, handler)
            assert handler.__name__.startswith("handle_"), (code, handler)


def test_the_table_refuses_a_code_claimed_twice_or_left_out(core: BrokerCore) -> None:
    with pytest.raises(ValueError, match="two processors"):
        dispatch_table([*core.processors(), core.send])
    with pytest.raises(ValueError, match="missing"):
        dispatch_table([core.send, core.pull])


def test_processors_take_collaborators_not_the_service() -> None:
    for cls in PROCESSOR_CLASSES:
        for parameter in inspect.signature(cls.__init__).parameters.values():
            annotation = str(parameter.annotation)
            assert "BrokerService" not in annotation, (cls.__name__, parameter.name)
            assert "BrokerCore" not in annotation, (cls.__name__, parameter.name)


def _imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved within the package."""
    package = processors_package.__name__
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{node.module}" if node.module else parent
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_no_processor_module_imports_another() -> None:
    package = processors_package.__name__
    modules = {path.stem: f"{package}.{path.stem}" for path in PROCESSOR_MODULES}
    assert set(modules) == {"admin", "client", "pop", "pull", "send", "transaction"}
    offenders: dict[str, list[str]] = {}
    for path in PROCESSOR_MODULES:
        others = ({package} | set(modules.values())) - {modules[path.stem]}
        imported = _imported_modules(path) & others
        if imported:
            offenders[path.stem] = sorted(imported)
    assert offenders == {}


def test_the_import_checker_sees_a_sibling(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from .send import SendProcessor\nfrom tidemq.broker.processors import pull\n"
    )
    package = processors_package.__name__
    assert {f"{package}.send", f"{package}.pull"} <= _imported_modules(sample)


def _name_lookups(path: Path) -> list[str]:
    """getattr/setattr/hasattr/delattr calls: where a name would be looked up."""
    lookups = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
        ):
            lookups.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return lookups


def test_no_handler_is_found_by_name() -> None:
    sources = [
        *PROCESSOR_MODULES,
        Path(handlers_module.__file__),
        Path(servicer_module.__file__),
    ]
    assert [lookup for path in sources for lookup in _name_lookups(path)] == []


def test_the_checker_sees_a_lookup(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def table(self, name):\n    return getattr(self, name)\n")
    assert _name_lookups(sample) == ["sample.py:2 getattr(self, name)"]


async def test_the_name_guard_and_refusals_answer_for_every_code(core: BrokerCore) -> None:
    table = core.dispatch_table()
    connection = _Connection()
    bad = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": "a b"})
    answer = await table[RequestCode.GET_TOPIC_CONFIG](bad, connection)  # type: ignore[arg-type]
    assert answer is not None and answer.code == ResponseCode.INVALID_PARAMETER
    missing = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": "Missing"})
    answer = await table[RequestCode.GET_TOPIC_CONFIG](missing, connection)  # type: ignore[arg-type]
    assert answer is not None
    assert (answer.code, answer.remark) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "topic[Missing] not exist",
    )
