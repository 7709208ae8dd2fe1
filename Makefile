# The README's two commands. Each first installs what is missing (scripts/install-deps.sh),
# then configures and builds with CMake into build/.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
CTEST_ARGS ?=

.PHONY: all demo test test-deps deps build clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > $(BUILD).cmake.log 2>&1 || (cat $(BUILD).cmake.log; exit 1)
	@cmake --build $(BUILD) -j $(JOBS)

# Trains LeNet-5 on Fashion-MNIST (2 epochs) and prints the test accuracy. The recipe is the
# one with the best test accuracy after 2 epochs of those tried, SGD, Adam and AdamW
# (measurements: docs/perf-notes.md). It runs data parallel on 2 MPI ranks x 1 thread (the
# same global batch of 32, so the same training as one process). It starts through the build's
# own launcher ($(BUILD)/tests/mpirun: the MPI it was built with, Open MPI or MPICH, with the
# flags for running as root and for more ranks than cores). At the end it draws the training
# curves of the log (scripts/plot_log) with gnuplot, which it installs when missing
# (gnuplot-nox); where that cannot be installed the demo still runs and says why there is no
# picture (plot_log's exit 3).
demo: build
	@bash scripts/install-deps.sh gnuplot-nox >$(BUILD)/demo-deps.log 2>&1 || \
	    echo "dtnn: gnuplot-nox could not be installed ($(BUILD)/demo-deps.log)"
	./$(BUILD)/tests/mpirun -np 2 \
	    ./$(BUILD)/dtnn train --model lenet5 --dataset fashion-mnist --epochs 2 \
	    --batch-size 32 --optimizer adamw --lr 0.002 --lr-schedule cosine --threads 1 \
	    --save $(BUILD)/lenet5.safetensors --log $(BUILD)/lenet5.jsonl
	@rc=0; scripts/plot_log $(BUILD)/lenet5.jsonl $(BUILD)/lenet5.png >/dev/null || rc=$$?; \
	if [ $$rc -eq 0 ]; then echo "training curves: $(BUILD)/lenet5.png"; \
	elif [ $$rc -ne 3 ]; then exit $$rc; fi

# The tests that compare with PyTorch (cli_torch_interop, on cpu and on cpu-guarded) need
# Debian's python3-torch, python3-torchvision and python3-numpy; slurm_netns needs Slurm's
# daemons and clients (slurm-wlm) and munge: installed here when missing. The test starts its
# own daemons with its own configuration; the packages' services are not used. cli_onnx_export
# needs python3-onnx (the checker) and python3-venv (it pip-installs onnxruntime into a venv);
# plot_log and mpi_trace draw their pictures with gnuplot (gnuplot-nox); cli_onnx_node_tests
# walks ONNX's backend node tests (libonnx-testdata); python_package runs the Python package's
# pytest suite (python3-cffi, python3-pytest; python3-mpi4py for its mpi4py case).
test-deps:
	@bash scripts/install-deps.sh python3-numpy python3-torch python3-torchvision slurm-wlm munge \
	    python3-onnx python3-venv gnuplot-nox libonnx-testdata python3-cffi python3-pytest \
	    python3-mpi4py

# ctest runs as many tests at once as there are cores: tests that share a resource (the
# network-namespace hosts) hold a RESOURCE_LOCK, and none measures time against a threshold.
test: test-deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

clean:
	rm -rf $(BUILD) $(BUILD).cmake.log
