# The two commands of the README. Both create .venv on first use and reuse it after.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: test demo container-test clean mutation

# Said before the first install, which is the long step: what it builds, how big, how long.
FIRST_RUN := make: first run: creating $(VENV), a virtual environment of about 1.2 GB (kernel-deps \
with its test tools, the CPU build of torch, the Hugging Face kernels 0.16 and 0.17.2 releases); \
this downloads and installs for a few minutes (about two on a fast connection), once: later runs \
reuse it, and 'make clean' removes it
UPDATE := make: pyproject.toml or the Makefile changed: updating $(VENV) (a minute or less)

$(STAMP): pyproject.toml Makefile
	@if test -x $(VENV)/bin/python; then echo "$(UPDATE)"; else echo "$(FIRST_RUN)"; fi
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --no-deps --target $(VENV)/compat/kernels-0.16 kernels==0.16.0 kernels-data==0.16.2
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --no-deps --target $(VENV)/compat/kernels-0.17 kernels==0.17.2 pyyaml==6.0.4
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

# examples/app/Dockerfile built with podman against the local Hub (docs/testing.md). Installs
# podman and debootstrap when missing and builds the Debian base image once.
container-test: $(STAMP)
	tests/container/prepare.sh
	$(VENV)/bin/python -m pytest -q --container -m container tests/functional/project/test_container.py

# Mutation testing of the core modules (docs/testing.md); not part of `make test`.
# MODULES=... picks some (default: all, pure ones first); MUTATION_ARGS passes more options.
MUTMUT_VERSION := 3.8.1
mutation: $(STAMP)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check mutmut==$(MUTMUT_VERSION)
	$(VENV)/bin/python tools/mutation.py $(MODULES) $(MUTATION_ARGS)

demo: $(STAMP)
	$(VENV)/bin/python -m tests.fixtures.demo

# Everything the targets above create in the checkout: the environment, the demo's Hub,
# cache and app, the compiled img2gray builds (.build-cache, made by the demo and the
# tests), mutation testing's scratch folder, pytest's and hypothesis' caches and the
# bytecode Python wrote; and container-test's base image, when podman is there. The
# podman and debootstrap packages container-test may have installed with apt-get stay.
BASE_IMAGE ?= localhost/kernel-deps-test/bookworm-python:1
clean:
	rm -rf $(VENV) .demo .mutation .build-cache .pytest_cache .hypothesis
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
	if command -v podman >/dev/null && podman image exists $(BASE_IMAGE); then podman image rm --force $(BASE_IMAGE); fi
