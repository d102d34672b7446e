# gotron: `make train` trains a small GPT on the Go standard library's source;
# `make test` runs every test. Both install what they need on a fresh Debian
# machine (as root through apt-get; otherwise they print the command).

GO       ?= go
BIN      := bin/gotron
# The main job: a byte-level GPT on $(go env GOROOT)/src/**/*.go, about three
# minutes on two cores.
TRAIN_FLAGS ?= --go-stdlib-corpus \
	--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 \
	--micro-batch-size 16 --global-batch-size 32 --train-iters 300 \
	--lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 30 \
	--weight-decay 0.1 --clip-grad 1.0 --hidden-dropout 0 --attention-dropout 0 \
	--log-interval 10 --eval-interval 100 --eval-iters 4 \
	--sample 400 --sample-prompt "func "

.PHONY: all build build-mpi train test test-go test-mpi bench reference vet fmt clean deps

all: build

deps:
	@scripts/deps.sh blas

build: deps
	$(GO) build -o $(BIN) ./cmd/gotron

# bin/gotron-mpi runs under mpirun: mpirun -np N bin/gotron-mpi train --backend mpi ...
build-mpi: deps
	@scripts/deps.sh mpi
	$(GO) build -tags mpi -o bin/gotron-mpi ./cmd/gotron

train: build
	$(BIN) train $(TRAIN_FLAGS)

test: test-go test-mpi

test-go: deps
	$(GO) vet ./...
	$(GO) test ./...

test-mpi: deps
	@scripts/deps.sh mpi
	comm/mpi/run_tests.sh
	$(GO) test -tags mpi -run TestMPITrain ./cmd/gotron

bench: build
	@echo "bench: OPENBLAS_CORETYPE is unset for this command so OpenBLAS picks the machine's own kernel"
	env -u OPENBLAS_CORETYPE $(BIN) bench
	env -u OPENBLAS_CORETYPE $(GO) test -run '^$$' -bench . -benchtime 2x ./comm/local

# Regenerates the PyTorch reference fixtures in testdata/gpt_ref.
reference:
	@scripts/deps.sh torch
	/usr/bin/python3 tools/torchref/gpt_ref.py --selftest --out testdata/gpt_ref --check testdata/gpt_ref

vet: deps
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

clean:
	rm -rf bin
