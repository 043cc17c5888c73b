# The two commands a newcomer types are `make run` and `make test`; both build
# the virtualenv from pyproject.toml first, so a fresh clone needs nothing else.
# `make run` installs the server's runtime dependencies only; `make test` adds
# the test tools and the Spark extra.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed-dev

.PHONY: run test bench lint clean venv pipeline wheel vendor-ui

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The compiled core (src/tidemq/record/*.c) is built by pip with the machine's
# gcc; a change to a C file reinstalls, which rebuilds it in place.
NATIVE_SOURCES := setup.py $(wildcard src/tidemq/record/*.c src/tidemq/record/*.h)

$(RUN_STAMP): pyproject.toml $(NATIVE_SOURCES) | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml $(NATIVE_SOURCES) | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(RUN_STAMP)

venv: $(STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/tidemq serve

# A wheel of tidemq in dist/ (runtime dependencies declared; `pip install
# dist/tidemq-*.whl` or `pip install '.[spark]'` from a checkout).
wheel: $(STAMP)
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .

# Real third-party clients for tests/interop (ali-ons, from interop/package-lock.json).
# npm writes node_modules/.package-lock.json on every install, so it is the stamp:
# `npm ci` runs again only when the committed lock file is newer. Without npm the
# step is skipped (the interop tests then skip themselves if `node` is missing too).
NPM_STAMP := interop/node_modules/.package-lock.json

$(NPM_STAMP): interop/package-lock.json interop/package.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix interop --no-audit --no-fund && touch $(NPM_STAMP); \
	else \
		echo "npm not found: not installing interop/node_modules (ali-ons interop tests need Node.js)"; \
	fi

# The dashboard's pinned front-end packages, so tests/unit/web/test_vendored_ui.py
# can compare the vendored copies with them (skipped, not failed, without npm).
WEBUI_STAMP := web-ui/node_modules/.package-lock.json

$(WEBUI_STAMP): web-ui/package-lock.json web-ui/package.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix web-ui --no-audit --no-fund && touch $(WEBUI_STAMP); \
	else \
		echo "npm not found: not installing web-ui/node_modules (the vendored-files check skips)"; \
	fi

# The dashboard's browser tests drive Debian's chromium (Playwright pointed at
# /usr/bin/chromium, never a downloaded browser build); installed with apt when
# missing and we may (root). Without it those tests skip themselves, saying why.
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else \
		echo "chromium not found and cannot apt-get install it: the browser tests will skip"; \
	fi

# The dashboard's front-end libraries (Preact, htm, uPlot), pinned in
# web-ui/package.json + package-lock.json, copied with their licences into
# src/tidemq/web/static/vendor/ (committed: the wheel and the page need no npm
# and no internet). Run after changing a version; tests/unit/web/test_vendored_ui.py
# checks the copies are the locked packages' files.
vendor-ui:
	npm ci --prefix web-ui --no-audit --no-fund
	$(PYTHON) web-ui/vendor.py

# The whole suite runs with the compiled core; the codec and store suites run
# again on the pure-Python twins (TIDEMQ_NO_EXTENSIONS=1), the reference.
test: $(STAMP) $(NPM_STAMP) $(WEBUI_STAMP) $(CHROMIUM)
	$(PY) -m pytest --durations=30
	TIDEMQ_NO_EXTENSIONS=1 $(PY) -m pytest -q tests/unit/codec tests/unit/store

# The Spark example: tidemq + a Structured Streaming job over order events, bounded
# (about a minute and a half), Parquet output in pipeline-output/ (removed first).
pipeline: $(STAMP)
	rm -rf pipeline-output
	$(PY) examples/orders_pipeline.py --out pipeline-output

bench: $(STAMP)
	$(PY) benchmarks/store_bench.py
	$(PY) benchmarks/e2e_bench.py
	$(PY) benchmarks/spark_bench.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
