#!/usr/bin/env bash
# gpt3-175b.sh is Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh
# for gotron: the same flags, grouped as there, with only the sizes scaled
# down to one small machine — the model (96 layers of 12,288 → 4 of 128),
# the parallel layout (TP 8 × PP 16 → TP 2 × PP 2, as four ranks of one
# process instead of torchrun's processes), the batch schedule (its
# thresholds in tokens, its batches), the run's length and its intervals.
# It takes the same five arguments as Megatron's script:
#
#	examples/gpt3-175b.sh CHECKPOINT_PATH TENSORBOARD_LOGS_PATH VOCAB_FILE MERGE_FILE DATA_PATH
#
# DATA_PATH is the prefix gotron preprocess writes (GPT2BPETokenizer, as
# VOCAB_FILE and MERGE_FILE are GPT-2's vocab.json and merges.txt):
#
#	bin/gotron preprocess --input corpus.jsonl --output-prefix data/corpus \
#	  --tokenizer-type GPT2BPETokenizer --append-eod
#	examples/gpt3-175b.sh ck tb vocab.json merges.txt data/corpus_text_document
#
# (`gotron ckpt convert --to-hf SRC DST --gpt2-tokenizer` writes GPT-2's
# vocab.json and merges.txt, which gotron has built in.) Flags after the
# five arguments are added at the end: any flag of `gotron train`.
#
# Two things Megatron itself refuses in its own script run here: the
# --global-batch-size beside --step-batch-size-schedule (gotron accepts it
# as the schedule's last batch) and the GPT-2 files without
# --tokenizer-type (gotron takes GPT2BPETokenizer, the type that reads
# them, and says so). --attention-backend chooses a CUDA kernel and
# changes nothing on a CPU: gotron notes it and goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 5 ]; then
	echo "usage: $0 CHECKPOINT_PATH TENSORBOARD_LOGS_PATH VOCAB_FILE MERGE_FILE DATA_PATH [gotron train flags...]" >&2
	exit 2
fi
CHECKPOINT_PATH=$1
TENSORBOARD_LOGS_PATH=$2
VOCAB_FILE=$3
MERGE_FILE=$4
DATA_PATH=$5
shift 5

# Megatron's DISTRIBUTED_ARGS are torchrun's; gotron runs the ranks as
# goroutines of one process (under mpirun, add --backend mpi instead).
WORLD_SIZE=4
DISTRIBUTED_ARGS=(--world-size "$WORLD_SIZE")

GPT_MODEL_ARGS=(
	--num-layers 4
	--hidden-size 128
	--num-attention-heads 8
	--seq-length 256
	--max-position-embeddings 256
	--attention-backend auto
)

# Megatron's schedule is 16, 320, 624, 928, 1232, 1536 from 0, 2.4B, 4.8B,
# 7.2B, 9.6B and 12B tokens; here the same steps over 4K-token strides.
TRAINING_ARGS=(
	--micro-batch-size 1
	--global-batch-size 16
	--step-batch-size-schedule "0:1 4K:4 8K:7 12K:10 16K:13 20K:16"
	--train-iters 40
	--weight-decay 0.1
	--adam-beta1 0.9
	--adam-beta2 0.95
	--init-method-std 0.006
	--clip-grad 1.0
	--fp16
	--lr 6.0e-5
	--lr-decay-style cosine
	--min-lr 6.0e-6
	--lr-warmup-fraction .001
	--lr-decay-iters 34
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size 2
	--pipeline-model-parallel-size 2
)

DATA_ARGS=(
	--data-path "$DATA_PATH"
	--vocab-file "$VOCAB_FILE"
	--merge-file "$MERGE_FILE"
	--split 949,50,1
)

EVAL_AND_LOGGING_ARGS=(
	--log-interval 5
	--save-interval 20
	--eval-interval 10
	--save "$CHECKPOINT_PATH"
	--load "$CHECKPOINT_PATH"
	--eval-iters 2
	--tensorboard-dir "$TENSORBOARD_LOGS_PATH"
)

GOTRON=${GOTRON:-bin/gotron}
[ "$GOTRON" != bin/gotron ] || [ -x bin/gotron ] || make build
exec "$GOTRON" train "${DISTRIBUTED_ARGS[@]}" \
	"${GPT_MODEL_ARGS[@]}" \
	"${TRAINING_ARGS[@]}" \
	"${MODEL_PARALLEL_ARGS[@]}" \
	"${DATA_ARGS[@]}" \
	"${EVAL_AND_LOGGING_ARGS[@]}" \
	"$@"
