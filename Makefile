# The two commands of the README. Both create .venv on first use and reuse it after.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: test demo clean

$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --no-deps --target $(VENV)/compat/kernels-0.16 kernels==0.16.0 kernels-data==0.16.2
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --no-deps --target $(VENV)/compat/kernels-0.17 kernels==0.17.2 pyyaml
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/python -m tests.fixtures.demo

clean:
	rm -rf $(VENV) .demo
