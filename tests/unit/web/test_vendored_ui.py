"""The dashboard's vendored libraries are the pinned npm packages' own files.

web-ui/package.json pins exact versions, package-lock.json locks them, and
`make vendor-ui` copies the files web-ui/vendor.json names into
src/tidemq/web/static/vendor/. Always checked: the pins, the lock and the
vendored VERSIONS.txt agree, every listed file and licence is there, and the
page's import map points at files that exist. With web-ui/node_modules
installed (`npm ci --prefix web-ui`), every vendored file must be byte-equal
to the installed package's file.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tidemq.web.static_files import STATIC_ROOT

REPO = Path(__file__).resolve().parents[3]
WEB_UI = REPO / "web-ui"
VENDOR = STATIC_ROOT / "vendor"
MANIFEST: dict[str, list[str]] = json.loads((WEB_UI / "vendor.json").read_text())


def pins() -> dict[str, str]:
    return dict(json.loads((WEB_UI / "package.json").read_text())["dependencies"])


def test_pins_lock_and_vendored_versions_agree() -> None:
    pinned = pins()
    assert set(pinned) == set(MANIFEST)
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in pinned.values()), "exact versions only"
    lock = json.loads((WEB_UI / "package-lock.json").read_text())["packages"]
    assert {name: lock[f"node_modules/{name}"]["version"] for name in pinned} == pinned
    vendored = (VENDOR / "VERSIONS.txt").read_text().splitlines()
    assert {line.split()[0]: line.split()[1] for line in vendored} == pinned


def test_every_listed_file_and_licence_is_vendored() -> None:
    for package, files in MANIFEST.items():
        assert "LICENSE" in files, f"{package}: its licence must ship with it"
        for name in files:
            assert (VENDOR / package / name).is_file(), f"{package}/{name} is not vendored"


def test_the_import_map_points_at_vendored_files() -> None:
    page = (STATIC_ROOT / "index.html").read_text()
    targets = re.findall(r'"(/static/[^"]+)"', page) + re.findall(r'href="(/static/[^"]+)"', page)
    assert any("preact.mjs" in t for t in targets) and any("uPlot" in t for t in targets)
    for target in targets:
        assert (STATIC_ROOT / target.removeprefix("/static/")).is_file(), target


@pytest.mark.skipif(
    not (WEB_UI / "node_modules").is_dir(),
    reason="web-ui/node_modules is not installed (npm ci --prefix web-ui): "
    "nothing to compare the vendored files with",
)
def test_vendored_files_are_the_installed_packages_files() -> None:
    for package, files in MANIFEST.items():
        installed = json.loads((WEB_UI / "node_modules" / package / "package.json").read_text())
        assert installed["version"] == pins()[package], f"{package}: run npm ci --prefix web-ui"
        for name in files:
            original = (WEB_UI / "node_modules" / package / name).read_bytes()
            assert (VENDOR / package / name).read_bytes() == original, (
                f"{package}/{name} differs from the npm package: run make vendor-ui"
            )


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout"
)
def test_no_vendored_file_is_ignored_by_git() -> None:
    """The page's files are committed: a .gitignore rule (dist/) must not hide any."""
    files = [str(p.relative_to(REPO)) for p in STATIC_ROOT.rglob("*") if p.is_file()]
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.stdout.split() == [], "ignored by git: " + result.stdout
