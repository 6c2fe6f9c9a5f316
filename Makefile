# The two commands of the README. Both create .venv on first use and reuse it after.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: test demo container-test clean mutation

$(STAMP): pyproject.toml Makefile
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

clean:
	rm -rf $(VENV) .demo .mutation
