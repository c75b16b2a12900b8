# sandboxd — every target here is what CI runs (.ci/run calls `make test`).
# Each set-up step is idempotent and quick when already done.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTO  := proto/sandboxd/v1/sandbox.proto
IMAGE  ?= sandboxd-workspace:latest
PYTEST_ARGS ?=
SIDECAR_IMAGE ?= sandboxd:latest

# The frameworks tier (tests/frameworks): each adapter of runtime_client/contrib/
# against its framework's own provider suite, in a virtualenv of its own so the
# frameworks' dependency trees stay out of .venv. Pinned by
# tests/frameworks/constraints.txt; FRAMEWORKS_LATEST=1 tests the newest
# releases instead (in .venv-frameworks-latest, pins ignored), and
# `make frameworks-pin` rewrites the pins from such an install.
PYENV_ROOT ?= $(HOME)/.pyenv
FRAMEWORKS_PYTHON ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.12*/bin/python3) python3.12)
FRAMEWORKS_EXTRAS := server,mcp,pytest,pydantic-ai,inspect-ai,openai-agents,deepagents
# langchain-tests: LangChain's provider suite for deepagents sandboxes; claude-agent-sdk:
# the MCP recipe is checked with the SDK's own option types and its bundled CLI.
FRAMEWORKS_TOOLS := pytest-timeout mypy langchain-tests claude-agent-sdk
FRAMEWORKS_CONSTRAINTS := tests/frameworks/constraints.txt
ifeq ($(FRAMEWORKS_LATEST),1)
FRAMEWORKS_VENV := .venv-frameworks-latest
FRAMEWORKS_PINS := --upgrade
FRAMEWORKS_REFRESH := FORCE
else
FRAMEWORKS_VENV := .venv-frameworks
FRAMEWORKS_PINS := -c $(FRAMEWORKS_CONSTRAINTS)
endif
FRAMEWORKS_PY := $(FRAMEWORKS_VENV)/bin/python
# uv (in .venv, from the dev extra) makes the virtualenv in seconds; pip's resolver took
# minutes on the four frameworks' trees together.
UV := $(VENV)/bin/uv
FRAMEWORKS_STAMP := $(FRAMEWORKS_VENV)/.installed

.PHONY: frameworks-venv frameworks-test frameworks-pin FORCE
.PHONY: help venv proto engine image host-tools run test lint typecheck unit fmt clean fuzz bench bench-layers ts-test ts-generate dist pythons k8s k8s-down k8s-test

help:
	@echo "make run    set everything up, then serve sandboxd in the foreground"
	@echo "make test   set everything up, then lint, type-check and run every test tier"
	@echo "make image  build the workspace image ($(IMAGE)) if it is out of date"
	@echo "make proto  regenerate sandboxd/contract/v1/*_pb2*.py from $(PROTO)"
	@echo "make sidecar-image  build sandboxd itself as a container image ($(SIDECAR_IMAGE))"
	@echo "make ts-test  the TypeScript client and Flue adapter tier (Node 22 from npm, real daemons)"
	@echo "make frameworks-test  the agent frameworks' provider suites (FRAMEWORKS_LATEST=1: newest releases)"
	@echo "make dist   build the sdist, the wheel and the npm tarball into dist/ as they would be published"
	@echo "make pythons  the client's tests on every Python 3.10+ pyenv has, each in a fresh venv"
	@echo "make bench  benchmark sandboxd vs raw docker exec vs in-process (BENCH_ARGS=--quick|--profile)"
	@echo "make k8s    bring up the single-node test Kubernetes cluster (scripts/k8s; make k8s-down stops it)"
	@echo "make k8s-test  the kubernetes tier and the conformance suite on the kubernetes backend"

$(STAMP): pyproject.toml
	@echo "[make] creating the virtualenv and installing sandboxd[dev]"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(STAMP)

# The proto stays in proto/ (package sandboxd.v1, where every language loads
# it); its Python modules belong to the contract package (scripts/gen_proto.py).
proto: $(STAMP)
	$(PY) scripts/gen_proto.py

# gVisor (runsc) is registered too where Debian has it: runtime=runsc sandboxes
# and their tests need it.
engine:
	@SANDBOXD_GVISOR=1 scripts/ensure-docker.sh

image: engine
	@scripts/build-image.sh $(IMAGE)

run: venv image
	@mkdir -p /run/sandboxd
	exec $(PY) -m sandboxd serve

# lint-imports: the import structure of ARCHITECTURE.md (pyproject.toml's contracts).
lint: venv
	$(VENV)/bin/ruff check sandboxd runtime_client tests examples fuzz bench scripts
	$(VENV)/bin/ruff format --check sandboxd runtime_client tests examples fuzz bench scripts
	$(VENV)/bin/lint-imports --no-cache

# The client's entry points: what `pip install sandboxd` and its client extras
# (agent, local, pytest, mcp, ctl) run. They support Python 3.10, so they are
# type-checked against 3.10's standard library too (pyproject.toml [tool.mypy]).
CLIENT_ENTRY_POINTS := runtime_client sandboxd/cli.py sandboxd/launch.py sandboxd/contract sandboxd/ctl sandboxd/mcp sandboxd/executor
# runtime_client/contrib/<framework> imports its framework: type-checked in the
# frameworks virtualenv (frameworks-test), where the framework is installed.
WITHOUT_FRAMEWORKS := --exclude 'runtime_client/contrib/[a-z_]+/'

typecheck: venv
	$(VENV)/bin/mypy $(WITHOUT_FRAMEWORKS) sandboxd runtime_client examples fuzz bench scripts
	$(VENV)/bin/mypy --python-version 3.10 $(WITHOUT_FRAMEWORKS) $(CLIENT_ENTRY_POINTS)

fmt: venv
	$(VENV)/bin/ruff format sandboxd runtime_client tests examples fuzz bench scripts
	$(VENV)/bin/ruff check --fix sandboxd runtime_client tests examples fuzz bench scripts

unit: venv
	$(PY) -m pytest -m "unit or inproc" $(PYTEST_ARGS)

host-tools:
	@scripts/ensure-host-tools.sh

# The test cluster comes up in the background first (cold: its build) while
# the other tiers run; the kubernetes tier runs last (scripts/k8s/test-tier.sh),
# beside the client's runs on the other Pythons.
test: venv image host-tools
	@scripts/k8s/test-tier.sh start
	$(MAKE) --no-print-directory lint typecheck dist
	$(PY) -m pytest --junitxml=.pythons/dev.xml $(PYTEST_ARGS)
	SANDBOXD_TS_DOCKER=1 $(MAKE) --no-print-directory ts-test
	$(MAKE) --no-print-directory frameworks-test
	@mkdir -p .pythons
	@echo "[make] the per-Python runs and the kubernetes tier side by side (both wait on engines far more than they compute)"
	@$(PY) scripts/pythons.py > .pythons/pythons.log 2>&1 & pythons=$$!; \
	$(MAKE) --no-print-directory k8s-test; k8s=$$?; \
	wait $$pythons; versions=$$?; cat .pythons/pythons.log; \
	exit $$(( k8s || versions ))

# The kubernetes tier: tests/kubernetes and the conformance suite on the
# kubernetes backend, on the test cluster (up first if need be, down after
# if it was not up before).
k8s-test: venv image
	scripts/k8s/test-tier.sh run $(PY) -m pytest tests/kubernetes tests/conformance -m kubernetes $(PYTEST_ARGS)

# The pinned virtualenv is rebuilt when the pins or pyproject change; the
# latest one looks for newer releases on every run.
$(FRAMEWORKS_STAMP): $(STAMP) pyproject.toml $(FRAMEWORKS_CONSTRAINTS) $(FRAMEWORKS_REFRESH)
	@test -x "$$(command -v $(FRAMEWORKS_PYTHON))" || { echo "[make] no Python 3.12 for the frameworks tier (FRAMEWORKS_PYTHON=$(FRAMEWORKS_PYTHON)); install it with pyenv" >&2; exit 1; }
	@echo "[make] $(FRAMEWORKS_VENV) ($$($(FRAMEWORKS_PYTHON) --version)) for the frameworks tier"
	$(UV) venv --quiet --allow-existing --python $(FRAMEWORKS_PYTHON) $(FRAMEWORKS_VENV)
	$(UV) pip install --quiet --python $(FRAMEWORKS_PY) $(FRAMEWORKS_PINS) -e '.[$(FRAMEWORKS_EXTRAS)]' $(FRAMEWORKS_TOOLS)
	@$(UV) pip freeze --python $(FRAMEWORKS_PY) 2>/dev/null | grep -iE '^(pydantic-ai-slim|inspect-ai|openai-agents|deepagents|langchain-tests|claude-agent-sdk)==' | tr '\n' ' '; echo
	@touch $@

frameworks-venv: $(FRAMEWORKS_STAMP)

# Type-checks the adapters with their frameworks installed, then runs the tier
# (real daemons on the Docker backend; its own count line).
frameworks-test: frameworks-venv image
	$(FRAMEWORKS_VENV)/bin/mypy --follow-imports=silent runtime_client/contrib tests/frameworks
	SANDBOXD_FRAMEWORKS=1 $(FRAMEWORKS_PY) -m pytest tests/frameworks $(PYTEST_ARGS)

# Rewrites the pins from the newest releases (FRAMEWORKS_LATEST's virtualenv).
frameworks-pin:
	$(MAKE) --no-print-directory FRAMEWORKS_LATEST=1 frameworks-venv
	{ echo "# make frameworks-pin: the frameworks tier's pins (every package but sandboxd)"; \
	  $(UV) pip freeze --python .venv-frameworks-latest/bin/python --exclude-editable; } > $(FRAMEWORKS_CONSTRAINTS)

# The single-node test Kubernetes cluster (scripts/k8s/README.md): built from
# the Go module proxy and Debian packages into /var/cache/sandboxd-k8s once,
# then seconds when it is already up. The workspace image is imported into it.
k8s: image
	@scripts/k8s/cluster.sh up

k8s-down:
	@scripts/k8s/cluster.sh down

# The TypeScript tier (clients/typescript): local backend always; `make test`
# adds the Docker backend (SANDBOXD_TS_DOCKER=1). Its own count line.
ts-test: venv
	SANDBOXD_PYTHON=$(CURDIR)/$(PY) scripts/ts-test.sh

# clients/typescript/src/generated/tools.ts from the Python tool specs.
ts-generate: venv
	$(PY) scripts/ts_data.py tools

# Property-based fuzzing of every RPC (fuzz/, tests/fuzz): FUZZ_CALLS generated
# calls against an in-process server on the local backend; `make test` runs 500.
FUZZ_CALLS ?= 11000
fuzz: venv
	SANDBOXD_FUZZ_CALLS=$(FUZZ_CALLS) $(PY) -m pytest tests/fuzz $(PYTEST_ARGS)

# sandboxd in a container (deploy/compose.yaml, deploy/k8s/pod.yaml); rebuilt
# only when its context (Dockerfile, pyproject, sandboxd/, runtime_client/, examples/) changes.
.PHONY: sidecar-image
sidecar-image: image
	@images/sandboxd/build.sh $(SIDECAR_IMAGE)

bench: venv image
	$(PY) -m bench.run $(BENCH_ARGS)

# Where one tool call's time goes, layer by layer (bench/README.md).
bench-layers: venv image
	$(PY) -m bench.layers $(BENCH_ARGS)

# The packages as published (scripts/dist.sh); tests/ecosystem/test_dist.py checks them.
dist: venv
	@scripts/dist.sh

# The client's tests on each Python 3.10+ here, each in a fresh venv with the
# wheel of `make dist` (scripts/pythons.py); a count per version.
pythons: venv image dist
	$(PY) scripts/pythons.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .venv-frameworks .venv-frameworks-latest .pytest_cache .mypy_cache .ruff_cache build *.egg-info dist .pythons
