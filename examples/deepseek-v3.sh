#!/usr/bin/env bash
# deepseek-v3.sh trains a DeepSeek-V3-shaped model scaled down to a
# laptop: DeepSeek-V3's 61 decoder layers (the first 3 dense, the other 58
# MoE with sigmoid routing, the aux-loss-free expert bias, group-limited
# top-k over 16 experts and one shared expert), multi-latent attention
# with DeepSeek-V3's YaRN, and one multi-token-prediction depth, under the
# pipeline layout of Megatron's own example, Et*3|(tt|)*29,m|L: 16
# pipeline ranks with 2 virtual stages each, the embedding and 3 layers on
# the first stage, 2 layers a stage after it, the MTP depth on a stage of
# its own and the loss on the last. The widths are tiny (hidden 64); the
# shape, the options and the layout are DeepSeek-V3's.
#
#	examples/deepseek-v3.sh                       # mock data, 16 in-process ranks
#	examples/deepseek-v3.sh --backend mpi         # 16 MPI processes (mpirun, bin/gotron-mpi)
#	examples/deepseek-v3.sh --pipeline-schedule zb-v   # the same 32 stages in a V (or dualpipev)
#	examples/deepseek-v3.sh --log-json ds.jsonl   # then: bin/gotron plot expert-load --log-json ds.jsonl
#	examples/deepseek-v3.sh inspect-memory        # the model's activation memory, measured beside the formula
#	                                              # (gotron inspect memory; add e.g. --tensor-model-parallel-size 2)
#
# Later flags override earlier ones: any flag of `gotron train` may be
# added. Under --backend mpi the script runs mpirun -np 16 itself (add
# MPIRUN_ARGS="--oversubscribe --allow-run-as-root" for a machine with
# fewer cores, as root).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL_ARGS=(
	--num-layers 61 --hidden-size 64 --num-attention-heads 4
	--ffn-hidden-size 128 --swiglu
	--seq-length 64 --max-position-embeddings 64
	--normalization RMSNorm --norm-epsilon 1e-6 --qk-layernorm
	--position-embedding-type rope --rotary-base 10000
	--untie-embeddings-and-output-weights --disable-bias-linear
	--init-method-std 0.02 --hidden-dropout 0 --attention-dropout 0
)
MLA_ARGS=(
	--multi-latent-attention --q-lora-rank 48 --kv-lora-rank 32
	--qk-head-dim 16 --qk-pos-emb-head-dim 8 --v-head-dim 16
	--rope-type yarn --rotary-scaling-factor 40 --mscale 1.0 --mscale-all-dim 1.0
	--yarn-original-max-position-embeddings 32
)
MOE_ARGS=(
	--num-experts 16 --moe-layer-freq "([0]*3+[1]*58)" --moe-ffn-hidden-size 32
	--moe-router-topk 4 --moe-router-num-groups 4 --moe-router-group-topk 2
	--moe-router-score-function sigmoid --moe-router-topk-scaling-factor 2.5
	--moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-3
	--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
	--moe-shared-expert-intermediate-size 32 --moe-grouped-gemm
)
MTP_ARGS=(--mtp-num-layers 1 --mtp-loss-scaling-factor 0.1)
PARALLEL_ARGS=(
	--pipeline-model-parallel-size 16 --virtual-pipeline-model-parallel-size 2
	--pipeline-model-parallel-layout "Et*3|(tt|)*29,m|L"
)
TRAINING_ARGS=(
	--micro-batch-size 1 --global-batch-size 32 --train-iters 10
	--lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 2
	--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --clip-grad 1.0
	--log-interval 1 --eval-interval 10 --eval-iters 1
)
DATA_ARGS=()
case " $* " in
*" --data-path "* | *" --train-data-path "* | *" --text-data-path "* | *" --go-stdlib-corpus "* | *" --mock-data "*) ;;
*) DATA_ARGS=(--mock-data --vocab-size 1024) ;;
esac
if [ "${1:-}" = inspect-memory ]; then
	shift
	[ -x bin/gotron ] || make build
	exec bin/gotron inspect memory "${MODEL_ARGS[@]}" "${MLA_ARGS[@]}" "${MOE_ARGS[@]}" "${MTP_ARGS[@]}" --vocab-size 1024 "$@"
fi
ARGS=("${MODEL_ARGS[@]}" "${MLA_ARGS[@]}" "${MOE_ARGS[@]}" "${MTP_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${DATA_ARGS[@]}" "$@")
case " $* " in
*" --backend mpi "*)
	[ -x bin/gotron-mpi ] || make build-mpi
	# shellcheck disable=SC2086 # MPIRUN_ARGS is a list of words
	exec mpirun -np 16 ${MPIRUN_ARGS:-} bin/gotron-mpi train "${ARGS[@]}"
	;;
esac
[ -x bin/gotron ] || make build
exec bin/gotron train --world-size 16 "${ARGS[@]}"
