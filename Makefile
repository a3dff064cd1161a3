# Both targets set everything up on a fresh machine: a virtual environment with the pinned
# dependencies (torch 2.13.0 CPU build), the package installed editable, then the job.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test install clean

# pip's and setuptools' output goes to $(VENV)/install.log, shown only if the install fails.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing into $(VENV) (torch 2.13.0 CPU build, the package editable; log: $(VENV)/install.log) ..."
	@( $(PY) -m pip install --upgrade pip && $(PY) -m pip install torch==2.13.0 && \
	   $(PY) -m pip install -e '.[dev]' ) > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/spanfill demo

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info
