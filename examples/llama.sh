#!/usr/bin/env bash
# llama.sh trains a Llama-shaped model at GPT-2-small's scale (12 layers,
# hidden 768, 12 heads in 4 key/value groups, sequence 1024) with
# Megatron's flags for Llama-class GPTs: RMSNorm, SwiGLU (ffn 2048),
# rotary position embeddings, grouped-query attention, an untied output
# layer, no biases, no dropout.
#
#	examples/llama.sh                          # mock data (vocabulary 32000)
#	examples/llama.sh --text-data-path corpus.txt   # byte-level text
#	examples/llama.sh --go-stdlib-corpus --num-layers 4 --train-iters 50
#
# Later flags override earlier ones: any flag of `gotron train` may be
# added (--tensor-model-parallel-size 2 --sequence-parallel --world-size 2,
# --context-parallel-size 2, …). On two cores one iteration of the full
# shape takes tens of seconds; shrink --num-layers or --seq-length to try it
# quickly.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL_ARGS=(
	--num-layers 12 --hidden-size 768 --num-attention-heads 12
	--group-query-attention --num-query-groups 4
	--ffn-hidden-size 2048 --swiglu
	--seq-length 1024 --max-position-embeddings 1024
	--normalization RMSNorm --norm-epsilon 1e-5
	--position-embedding-type rope --rotary-base 10000 --rotary-percent 1.0
	--untie-embeddings-and-output-weights --disable-bias-linear
	--init-method-std 0.02 --hidden-dropout 0 --attention-dropout 0
)
TRAINING_ARGS=(
	--micro-batch-size 1 --global-batch-size 8 --train-iters 20
	--lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 2
	--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --clip-grad 1.0
	--log-interval 1 --eval-interval 10 --eval-iters 2
)
DATA_ARGS=()
case " $* " in
*" --data-path "* | *" --train-data-path "* | *" --text-data-path "* | *" --go-stdlib-corpus "* | *" --mock-data "*) ;;
*) DATA_ARGS=(--mock-data --vocab-size 32000) ;;
esac
[ -x bin/gotron ] || make build
exec bin/gotron train "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${DATA_ARGS[@]}" "$@"
