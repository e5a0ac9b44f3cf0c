# One place for the commands a person and CI run. `make demo` and `make test` are the quick start.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean dist image compiled pure

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gpufleet demo -o demo-out

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The twin compiled with mypyc (gpufleet/compiled.py): the same answers, faster. Rebuilt only when its
# sources changed; a stale build is never run (gpufleet falls back to the sources and says so).
compiled: $(STAMP)
	$(BIN)/python -m gpufleet.compiler

pure: $(STAMP)
	$(BIN)/python -m gpufleet.compiler --clean

# The suite on the compiled build, then the tests that reach inside the twin (marked pure) from source.
test: lint compiled
	$(BIN)/pytest -n 2 --dist loadfile --durations=15
	GPUFLEET_PURE=1 $(BIN)/pytest -n 2 -m pure -q

bench: $(STAMP)
	$(BIN)/python -m bench $(NAME) $(ARGS)

clean:
	rm -rf $(VENV) demo-out dist build src/gpufleet/compiled-sources.json src/gpufleet__mypyc.*
	find src -name '*.so' -delete

# The wheel and sdist (`twine check dist/*` before an upload).
dist: $(STAMP)
	$(BIN)/python -m build --outdir dist .

# gpufleet's OCI image, dist/gpufleet-<version>.oci.tar, built without a container daemon (needs root,
# mmdebstrap and umoci: .ci/setup.d/image.sh). Push it: skopeo copy oci-archive:dist/... docker://...
image: $(STAMP)
	$(BIN)/python -m build --wheel -q --outdir dist .
	PY=$(BIN)/python bash image/build.sh

# The testbed: a real control plane with Kueue and kwok fake GPU nodes on 127.0.0.1 (docs/testbed.md).
# POLICY picks the fleet whose nodes are faked; `export KUBECONFIG=...` is printed by testbed-up.
POLICY ?= examples/fleet.yaml
.PHONY: testbed-up testbed-down
testbed-up: $(STAMP)
	PATH="$$PATH:/usr/local/go/bin" $(BIN)/python -m gpufleet.testbed up --policy $(POLICY)

testbed-down: $(STAMP)
	$(BIN)/python -m gpufleet.testbed down

# A MultiKueue federation: a manager (no nodes) and one testbed per cluster of a policy with clusters:
# (docs/multikueue.md). FEDERATION picks the policy.
FEDERATION ?= examples/federation.yaml
.PHONY: federation-up federation-down
federation-up: $(STAMP)
	PATH="$$PATH:/usr/local/go/bin" $(BIN)/python -m gpufleet.testbed up --federation --policy $(FEDERATION)

federation-down: $(STAMP)
	$(BIN)/python -m gpufleet.testbed down --federation
