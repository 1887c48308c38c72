# dycore — the two commands a new user needs:
#   make run    install, run the small mountain-wave case to t = 3000 s, draw w  (~3 min, 2 cores)
#   make test   install, run the test suite (GPU kernels under the CUDA simulator)
#   (make test-quick: the quick lane while you work; make lint: ruff)
PYTHON ?= python3
CONFIG ?= configs/mountainwave3d_small.yaml
OUTPUT ?= output/mountainwave3d_small.nc

.PHONY: install run run-paper test test-quick lint regression bench bench-smoke docs gpu-check clean verify

install:
	$(PYTHON) -m pip install -q -e ".[test,mpi]"

run: install
	$(PYTHON) -m dycore run $(CONFIG) --output $(OUTPUT) --overwrite
	$(PYTHON) -m dycore plot $(OUTPUT)

# compare w of $(OUTPUT) (made by `make run`) with 3-D linear theory (docs/verify.md)
verify: install
	$(PYTHON) -m dycore verify $(OUTPUT) --png $(basename $(OUTPUT))_verify.png --json $(basename $(OUTPUT))_verify.json --overwrite

run-paper: install
	$(PYTHON) -m dycore run configs/mountainwave3d.yaml --steps 5 --overwrite

# the suite runs on TEST_WORKERS processes (pytest-xdist), a test file to a process so that
# each module's fixtures are built once: 35-40 min on 2 cores, where one process took 83-94 min
# (2026-11/12). `make test TEST_WORKERS=8` on a larger machine; TEST_WORKERS=0 runs in-process.
TEST_WORKERS ?= 2
test: install
	$(PYTHON) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests --ignore=tests/regression

# the quick lane (markers in pyproject.toml): no long runs, no MPI ranks, no CUDA simulator
test-quick: install
	$(PYTHON) -m pytest -q tests --ignore=tests/regression -m "not slow and not mpi and not gpu_sim"

# ruff (pyflakes + pycodestyle errors; [tool.ruff] in pyproject.toml, generated *_gen.py skipped)
lint: install
	$(PYTHON) -m ruff check .

regression: install
	$(PYTHON) -m pytest -q tests/regression

bench: install
	$(PYTHON) -m dycore bench configs/mountainwave3d.yaml --json output/bench.json

bench-smoke: install
	$(PYTHON) -m dycore bench configs/mountainwave3d_small.yaml --mesh 4,4,3 --repeat 2 --paths cpu --json output/bench_smoke.json

# generated files: the key reference, the JSON Schema and the element loops (drift tests check them)
docs: install
	$(PYTHON) -m dycore config --reference > docs/config-reference.md
	$(PYTHON) -m dycore config --schema > docs/config-schema.json
	$(PYTHON) -m dycore.assembly.codegen

# on a GPU machine (offline, wheels in .whl/): environment + CPU-vs-GPU checks + timings
gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf output .pytest_cache build *.egg-info
