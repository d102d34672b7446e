#!/usr/bin/env bash
# moe.sh trains a Mixtral-style mixture of experts at a small scale (8
# layers, hidden 512, 8 heads in 4 key/value groups, sequence 512): the
# Llama-class options of llama.sh, and in every layer 8 SwiGLU experts of
# width 1024 with top-2 routing and the load-balancing loss, the experts
# spread over 2 expert-parallel ranks with the all-to-all dispatcher.
#
#	examples/moe.sh                            # mock data, 2 in-process ranks
#	examples/moe.sh --log-json moe.jsonl       # then: bin/gotron plot expert-load --log-json moe.jsonl
#	examples/moe.sh --expert-model-parallel-size 1 --world-size 1
#
# Later flags override earlier ones: any flag of `gotron train` may be
# added (--moe-router-score-function sigmoid --moe-router-enable-expert-bias,
# --moe-expert-capacity-factor 1.0, --moe-shared-expert-intermediate-size
# 1024, --tensor-model-parallel-size 2 --sequence-parallel --world-size 4, …).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL_ARGS=(
	--num-layers 8 --hidden-size 512 --num-attention-heads 8
	--group-query-attention --num-query-groups 4
	--ffn-hidden-size 1024 --swiglu
	--seq-length 512 --max-position-embeddings 512
	--normalization RMSNorm --norm-epsilon 1e-5
	--position-embedding-type rope --rotary-base 10000
	--untie-embeddings-and-output-weights --disable-bias-linear
	--init-method-std 0.02 --hidden-dropout 0 --attention-dropout 0
)
MOE_ARGS=(
	--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 1024
	--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2
	--moe-token-dispatcher-type alltoall --moe-grouped-gemm
	--expert-model-parallel-size 2 --world-size 2
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
exec bin/gotron train "${MODEL_ARGS[@]}" "${MOE_ARGS[@]}" "${TRAINING_ARGS[@]}" "${DATA_ARGS[@]}" "$@"
