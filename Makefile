# The two commands of the README. Both create .venv on first use and reuse it after.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: test demo clean

$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --no-deps --target $(VENV)/compat/kernels-0.16 kernels==0.16.0 kernels-data==0.16.2
# kernels 0.16's CLI imports its signature checks (sigstore, cryptography) at start-up;
# bench/compare.py runs that CLI with these on its path, beside the library above.
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --no-deps --target $(VENV)/compat/kernels-0.16-cli \
		sigstore==4.5.1 sigstore-models==0.0.6 sigstore-rekor-types==0.0.18 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 \
		id==1.6.1 PyJWT==2.15.1 rfc3161-client==1.0.9 rfc8785==0.1.4 tuf==7.0.1 securesystemslib==1.6.0 \
		platformdirs==4.14.9 email-validator==2.4.0 dnspython==2.9.2
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --no-deps --target $(VENV)/compat/kernels-0.17 kernels==0.17.2 pyyaml
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/python -m tests.fixtures.demo

clean:
	rm -rf $(VENV) .demo
