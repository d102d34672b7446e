# gotron: `make train` trains a small GPT on the Go standard library's source;
# `make test` runs every test. Both install what they need on a fresh Debian
# machine (as root through apt-get; otherwise they print the command).

GO       ?= go
BIN      := bin/gotron
# The fused kernels' AVX2/AVX-512 paths use Go's experimental SIMD package;
# without it they run as plain Go loops (same results, slower).
export GOEXPERIMENT := simd
# The main job: a byte-level GPT on $(go env GOROOT)/src/**/*.go, about two
# minutes on two cores, as two data-parallel ranks (the loss curve of one
# rank, 12-17% faster on two cores), on the real data path: gotron preprocess tokenizes the
# sources once into an indexed dataset (one document per file, each ended by
# the end-of-document token), and training reads it as Megatron's GPTDataset
# (documents split 969,30,1 into train, valid and test, samples shuffled).
# TRAIN_FLAGS are appended to the defaults and override them, one flag at
# a time (the last value of a flag wins): make train TRAIN_FLAGS="--train-iters 1000".
TRAIN_DATA  ?= out/data/gostdlib
TRAIN_BASE_FLAGS ?= --world-size 2 --data-path $(TRAIN_DATA)_text_document --split 969,30,1 \
	--tokenizer-type ByteLevelTokenizer \
	--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 \
	--micro-batch-size 16 --global-batch-size 32 --train-iters 200 \
	--lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 20 \
	--weight-decay 0.1 --clip-grad 1.0 --hidden-dropout 0 --attention-dropout 0 \
	--log-interval 10 --eval-interval 50 --eval-iters 4 \
	--sample 400 --sample-prompt "func "

.PHONY: all build build-mpi train precision fuzz fuzz-brief test test-go test-mpi bench reference vet fmt clean deps

all: build

deps:
	@scripts/deps.sh blas dnnl

# The commit goes into the binary for gotron --version, also where the
# environment turns the go command's own stamping off (-buildvcs=false).
COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null)
LDFLAGS := -X main.buildCommit=$(COMMIT)

build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gotron

# bin/gotron-mpi runs under mpirun: mpirun -np N bin/gotron-mpi train --backend mpi ...
build-mpi: deps
	@scripts/deps.sh mpi
	$(GO) build -tags mpi -ldflags "$(LDFLAGS)" -o bin/gotron-mpi ./cmd/gotron

train: build $(TRAIN_DATA)_text_document.idx
	$(BIN) train $(TRAIN_BASE_FLAGS) $(TRAIN_FLAGS)

$(TRAIN_DATA)_text_document.idx: | build
	$(BIN) preprocess --input "$$($(GO) env GOROOT)/src" --input-extensions go \
		--output-prefix $(TRAIN_DATA) --tokenizer-type ByteLevelTokenizer --append-eod

# The make train model in float32 and in bf16, the loss curves compared:
# bf16 must stay within 2% of float32 at every logged iteration (about
# five minutes on two cores).
precision: build $(TRAIN_DATA)_text_document.idx
	scripts/precision-curve.sh $(TRAIN_BASE_FLAGS) $(TRAIN_FLAGS)

test: test-go test-mpi

# Tests measure the bf16 plan in their own processes and keep nothing
# (dnnl.Plan): a measurement taken among parallel test processes is not
# one to keep for later runs.
test-go test-mpi fuzz fuzz-brief: export GOTRON_CACHE_DIR := off

# Every fuzz target (every func Fuzz... in a *_test.go file, found by
# scripts/fuzz.sh) for FUZZTIME each; make test runs each for FUZZBRIEF.
# A failing input lands in PKG/testdata/fuzz/NAME/: a bug to fix.
FUZZTIME  ?= 30s
FUZZBRIEF ?= 3s
fuzz:
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME)

fuzz-brief:
	GO=$(GO) scripts/fuzz.sh $(FUZZBRIEF)

# Every package in the SIMD build, and the packages with vector paths also
# in the plain build; the GEMM-bearing packages again with bf16 GEMMs
# widened to float32 (the path dnnl.Plan takes where native bf16 is the
# slower; the default run takes this machine's plan); the packages that
# allocate tensors with tensor.Empty again with every such tensor filled
# with NaN (build tag gotron_poison), so an element a kernel leaves
# unwritten fails a test; then every fuzz target for FUZZBRIEF.
POISONED := ./tensor/... ./autograd/... ./nn/... ./tp/... ./moe/... ./cp/... \
	./models/... ./pp/... ./dp/... ./train/... ./bench/... ./plan/...
test-go: deps
	$(GO) vet ./...
	$(GO) test ./...
	GOEXPERIMENT= $(GO) test ./tensor/... ./nn/... ./models/... ./train/... ./bench/...
	GOTRON_BF16_GEMM=float32 $(GO) test ./tensor/... ./nn/... ./moe/... ./models/...
	$(GO) test -tags gotron_poison $(POISONED)
	GO=$(GO) scripts/fuzz.sh $(FUZZBRIEF)

test-mpi: deps
	@scripts/deps.sh mpi
	comm/mpi/run_tests.sh
	$(GO) test -tags mpi -run 'TestMPITrain|TestMPISignal|TestMPIStartErrors' ./cmd/gotron

# Training throughput of gotron and, side by side in one run, of PyTorch on
# the same models, tuned for this CPU and as installed; every GEMM kernel
# at the models' shapes and the GEMM ceiling (bench --gemm, float32 and
# bf16); gotron again under tensor (and sequence) parallelism, and the
# overlap of the parallel linears' collectives; one rank against pipeline
# parallelism (1F1B and interleaved) over 8 microbatches, with the measured
# bubble; data parallelism under mpirun; bf16 against float32; then
# point-to-point latency and collective bandwidth next to a
# memory copy. OPENBLAS_CORETYPE is unset for these commands so
# OpenBLAS picks the machine's own kernel.
bench: build build-mpi
	scripts/bench-torch.sh 3
	env -u OPENBLAS_CORETYPE $(BIN) bench --gemm --configs small,medium
	env -u OPENBLAS_CORETYPE $(BIN) bench --gemm --configs small,medium --bf16
	env -u OPENBLAS_CORETYPE $(BIN) bench --tensor-model-parallel-size 2
	env -u OPENBLAS_CORETYPE $(BIN) bench --tensor-model-parallel-size 2 --sequence-parallel
	env -u OPENBLAS_CORETYPE $(GO) test ./tp -run '^$$' -bench LinearBackward -benchtime 30x -count 3
	scripts/bench-pipeline.sh 3
	scripts/bench-zero-bubble.sh 3
	scripts/plan-vs-measured.sh 2
	$(GO) test -run '^$$' -bench 'Predict3072|Search1536' -benchtime 1x ./plan
	scripts/bench-dp.sh 3
	scripts/bench-cp.sh 3
	scripts/bench-llama.sh 3
	scripts/bench-moe.sh 3
	scripts/bench-preprocess.sh 3
	scripts/bench-precision.sh 3
	scripts/bench-coretype.sh 3
	$(GO) test -run '^$$' -bench PingPong -benchtime 1s ./pp/p2p
	$(GO) test -run '^$$' -bench 'AllReduce|Memcpy' -benchtime 1s ./comm/local
	comm/mpi/run_tests.sh -bench

# Regenerates the reference fixtures: PyTorch's in testdata/gpt_ref (GPT-2),
# testdata/gpt_ref_{llama,variant_a,variant_b,variant_c} and testdata/tp_ce,
# the bucket layouts in dp/testdata/layout, and the Hugging Face models in
# testdata/hf_{gpt2,llama} and testdata/hf_export_{gpt2,llama}.
reference:
	@scripts/deps.sh torch
	/usr/bin/python3 tools/torchref/gpt_ref.py --selftest --out testdata/gpt_ref --check testdata/gpt_ref
	/usr/bin/python3 tools/torchref/gpt_ref.py --config llama --out testdata/gpt_ref_llama --check testdata/gpt_ref_llama
	/usr/bin/python3 tools/torchref/gpt_ref.py --config variant_a --out testdata/gpt_ref_variant_a --check testdata/gpt_ref_variant_a
	/usr/bin/python3 tools/torchref/gpt_ref.py --config variant_b --out testdata/gpt_ref_variant_b --check testdata/gpt_ref_variant_b
	/usr/bin/python3 tools/torchref/gpt_ref.py --config variant_c --out testdata/gpt_ref_variant_c --check testdata/gpt_ref_variant_c
	/usr/bin/python3 tools/torchref/gpt_ref.py --config moe_a --out testdata/gpt_ref_moe_a --check testdata/gpt_ref_moe_a
	/usr/bin/python3 tools/torchref/gpt_ref.py --config moe_b --out testdata/gpt_ref_moe_b --check testdata/gpt_ref_moe_b
	/usr/bin/python3 tools/torchref/gpt_ref.py --config moe_c --out testdata/gpt_ref_moe_c --check testdata/gpt_ref_moe_c
	/usr/bin/python3 tools/torchref/gpt_ref.py --config mtp_a --out testdata/gpt_ref_mtp_a --check testdata/gpt_ref_mtp_a
	/usr/bin/python3 tools/torchref/gpt_ref.py --config mtp_b --out testdata/gpt_ref_mtp_b --check testdata/gpt_ref_mtp_b
	/usr/bin/python3 tools/torchref/gpt_ref.py --config mla_a --out testdata/gpt_ref_mla_a --check testdata/gpt_ref_mla_a
	/usr/bin/python3 tools/torchref/gpt_ref.py --config mla_b --out testdata/gpt_ref_mla_b --check testdata/gpt_ref_mla_b
	/usr/bin/python3 tools/torchref/tp_ce_ref.py --out testdata/tp_ce
	/usr/bin/python3 tools/torchref/tp_ce_ref.py --check testdata/tp_ce
	/usr/bin/python3 tools/torchref/bucket_layout_ref.py
	/usr/bin/python3 tools/torchref/moe_ref.py --selftest
	/usr/bin/python3 tools/torchref/hf_ref.py --family gpt2 --out testdata/hf_gpt2 --check testdata/hf_gpt2
	/usr/bin/python3 tools/torchref/hf_ref.py --family llama --out testdata/hf_llama --check testdata/hf_llama
	GOTRON_UPDATE_HF_EXPORT=1 $(GO) test -run TestExportMatchesPyTorch ./ckpt/hf
	/usr/bin/python3 tools/torchref/hf_ref.py --logits testdata/hf_export_gpt2 --check testdata/hf_export_gpt2
	/usr/bin/python3 tools/torchref/hf_ref.py --logits testdata/hf_export_llama --check testdata/hf_export_llama
	/usr/bin/python3 tools/torchref/moe_ref.py --out testdata/moe_ref
	/usr/bin/python3 tools/torchref/moe_ref.py --check testdata/moe_ref
	/usr/bin/python3 tools/torchref/indexed_ref.py --out data/indexed/testdata --check data/indexed/testdata
	/usr/bin/python3 tools/torchref/gpt_dataset_ref.py
	/usr/bin/python3 tools/torchref/gpt_dataset_ref.py --check
	/usr/bin/python3 tools/torchref/gpt2_bpe_ref.py
	/usr/bin/python3 tools/torchref/gpt2_bpe_ref.py --check

vet: deps
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

clean:
	rm -rf bin
