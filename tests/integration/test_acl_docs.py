"""docs/access-control.md and the README's "Access control" section, run as written:
the guide's policy file is the server's (`tidemq serve --acl`), its CLI lines and
Python examples run in order against it (the name server address substituted)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_examples import BLOCK, DEFAULT_GRPC, DEFAULT_NAMESRV, DOCS, blocks, run_python

from tidemq.testing.processes import server_env, started

pytestmark = pytest.mark.slow

GUIDE = DOCS / "access-control.md"
README = DOCS.parent / "README.md"
CLI_DEADLINE_S = 60.0


def untagged(text: str) -> list[str]:
    return [code for tag, code in BLOCK.findall(text) if not tag]


def policy() -> str:
    return next(code for code in untagged(GUIDE.read_text()) if "accounts:" in code)


def cli_lines(text: str) -> list[list[str]]:
    """The `tidemq` commands of the untagged blocks, servers excepted."""
    lines = [
        shlex.split(line)
        for code in untagged(text)
        for line in code.splitlines()
        if line.startswith("tidemq ")
    ]
    return [line for line in lines if line[1] not in ("serve", "namesrv", "broker")]


def readme_section() -> str:
    text = README.read_text()
    match = re.search(r"^## Access control\n(.*?)^## ", text, re.S | re.M)
    assert match, "the README has no Access control section"
    return match.group(1)


def test_the_guide_shows_the_policy_the_cli_and_the_client() -> None:
    assert "admin: true" in policy()
    assert len(cli_lines(GUIDE.read_text())) >= 3
    assert len(blocks("access-control.md", "python")) >= 5  # 3 tidemq client, 2 official 5.x
    assert cli_lines(readme_section()) and "credentials=" in readme_section()


def _cli(home: Path, namesrv: str, command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *command[1:], "--namesrv", namesrv],
        capture_output=True,
        text=True,
        env=server_env(home),
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout}{result.stderr}"


def _python(home: Path, ready: dict[str, str], code: str, name: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "TIDEMQ_OFFSET_STORE_DIR": str(home / "offsets")}
    result = run_python(
        code,
        home / f"{name}.py",
        {**env, "HOME": str(home)},  # the official client logs under ~/logs
        replace={DEFAULT_NAMESRV: ready["namesrv"], DEFAULT_GRPC: ready["grpc"]},
    )
    assert result.returncode == 0, f"{name} failed:\n{code}\n{result.stderr}"
    return result.stdout


def test_the_guide_and_the_readme_section_run_against_serve_acl(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(policy(), encoding="utf-8")
    args = ["serve", "--data-dir", str(tmp_path / "data"), "--acl", str(acl)]
    args += ["--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0"]
    with started(args, tmp_path, "serve") as (server, ready):
        namesrv = ready["namesrv"]
        for command in cli_lines(GUIDE.read_text()):
            _cli(tmp_path, namesrv, command)
        outputs = [
            _python(tmp_path, ready, code, f"guide_{i}")
            for i, code in enumerate(blocks("access-control.md", "python"))
        ]
        assert outputs[0].strip() == "SEND_OK"
        assert outputs[1].startswith("16 ")
        assert "No default permission for topic:Audit" in outputs[1]
        assert "order 2" in outputs[2]
        assert outputs[3].strip() == "True"  # the official 5.x client over gRPC
        assert "40300" in outputs[4] and "No default permission for topic:Audit" in outputs[4]
        for command in cli_lines(readme_section()):
            _cli(tmp_path, namesrv, command)
        for i, (tag, code) in enumerate(BLOCK.findall(readme_section())):
            if tag == "python":
                assert _python(tmp_path, ready, code, f"readme_{i}").strip() == "SEND_OK"
        assert server.stop() == 0
