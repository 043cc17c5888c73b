"""Copy the dashboard's front-end libraries from web-ui/node_modules into the package.

`make vendor-ui` runs `npm ci` here (the versions pinned in package.json and
package-lock.json), then this script: every file vendor.json names is copied
to src/tidemq/web/static/vendor/<package>/<same path>, licence included, and
the versions are written to vendor/VERSIONS.txt. The copies are committed, so
the wheel (and the page) need neither npm nor the internet;
tests/unit/web/test_vendored_ui.py checks they are the locked packages' files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES = HERE / "node_modules"
TARGET = HERE.parent / "src" / "tidemq" / "web" / "static" / "vendor"


def main() -> None:
    manifest: dict[str, list[str]] = json.loads((HERE / "vendor.json").read_text())
    if TARGET.exists():
        shutil.rmtree(TARGET)
    versions = []
    for package, files in sorted(manifest.items()):
        meta = json.loads((MODULES / package / "package.json").read_text())
        versions.append(f"{package} {meta['version']} ({meta.get('license', '?')})")
        for name in files:
            target = TARGET / package / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(MODULES / package / name, target)
    (TARGET / "VERSIONS.txt").write_text("\n".join(versions) + "\n")
    print(f"vendored into {TARGET}: " + ", ".join(versions))


if __name__ == "__main__":
    main()
