"""Every Python example in docs/spark.md runs as written against a real
`tidemq serve` (the name server address substituted), in a fresh
interpreter. The examples read the `Orders` topic that the guide's pipeline
fills; here it holds a few tagged order events. One server for the module;
each example starts its own local Spark session, as a user's script would."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_examples import DEFAULT_NAMESRV, blocks, run_python

from tidemq.client.producer import make_message
from tidemq.spark.session import java_available
from tidemq.testing.client_support import create_topic, produce
from tidemq.testing.processes import ServerProcess, serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not java_available(), reason="PySpark needs Java 17"),
]


def examples() -> list[str]:
    return blocks("spark.md", "python")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("spark-docs") / "data") as process:
        asyncio.run(create_topic(process.namesrv, "Orders", queues=2))
        orders = [
            make_message("Orders", f"order-{i}", tags=("paid", "tick")[i % 2]) for i in range(6)
        ]
        asyncio.run(produce(process.namesrv, orders))
        yield process


def test_the_guide_has_examples() -> None:
    assert examples()


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs(index: int, server: ServerProcess, tmp_path: Path) -> None:
    code = examples()[index]
    assert DEFAULT_NAMESRV in code, "examples name the default name server"
    result = run_python(
        code,
        tmp_path / f"example_{index}.py",
        {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
        replace={DEFAULT_NAMESRV: server.namesrv},
    )
    assert result.returncode == 0, f"example {index} failed:\n{code}\n{result.stderr[-3000:]}"
    assert "paid" in result.stdout and "tick" in result.stdout, result.stdout
