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

.PHONY: help venv proto engine image host-tools run test lint typecheck unit fmt clean fuzz bench bench-layers ts-test ts-generate

help:
	@echo "make run    set everything up, then serve sandboxd in the foreground"
	@echo "make test   set everything up, then lint, type-check and run every test tier"
	@echo "make image  build the workspace image ($(IMAGE)) if it is out of date"
	@echo "make proto  regenerate sandboxd/v1/*_pb2*.py from $(PROTO)"
	@echo "make sidecar-image  build sandboxd itself as a container image ($(SIDECAR_IMAGE))"
	@echo "make ts-test  the TypeScript client and Flue adapter tier (Node 22 from npm, real daemons)"
	@echo "make bench  benchmark sandboxd vs raw docker exec vs in-process (BENCH_ARGS=--quick|--profile)"

$(STAMP): pyproject.toml
	@echo "[make] creating the virtualenv and installing sandboxd[dev]"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(STAMP)

proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -I proto --python_out=. --grpc_python_out=. --pyi_out=. $(PROTO)

# gVisor (runsc) is registered too where Debian has it: runtime=runsc sandboxes
# and their tests need it.
engine:
	@SANDBOXD_GVISOR=1 scripts/ensure-docker.sh

image: engine
	@scripts/build-image.sh $(IMAGE)

run: venv image
	@mkdir -p /run/sandboxd
	exec $(PY) -m sandboxd serve

lint: venv
	$(VENV)/bin/ruff check sandboxd runtime_client tests examples fuzz bench
	$(VENV)/bin/ruff format --check sandboxd runtime_client tests examples fuzz bench

typecheck: venv
	$(VENV)/bin/mypy sandboxd runtime_client examples fuzz bench

fmt: venv
	$(VENV)/bin/ruff format sandboxd runtime_client tests examples
	$(VENV)/bin/ruff check --fix sandboxd runtime_client tests examples

unit: venv
	$(PY) -m pytest -m "unit or inproc" $(PYTEST_ARGS)

host-tools:
	@scripts/ensure-host-tools.sh

test: venv image host-tools lint typecheck
	$(PY) -m pytest $(PYTEST_ARGS)
	SANDBOXD_TS_DOCKER=1 $(MAKE) --no-print-directory ts-test

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

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
