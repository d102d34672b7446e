#!/usr/bin/env bash
# gpt2-small.sh trains a GPT-2-small-shaped model (12 layers, hidden 768,
# 12 heads, sequence 1024: about 124M parameters with GPT-2's vocabulary)
# with Megatron's flags for that shape: LayerNorm, GELU (tanh form, fused
# with linear_fc1's bias), learned absolute positions, biases, tied
# embeddings. The options are Megatron's (and gotron's) defaults, spelled
# out; the shape has no default and must be given, as in Megatron.
#
#	examples/gpt2-small.sh                          # mock data (vocabulary 50257)
#	examples/gpt2-small.sh --data-path data/corpus_text_document --tokenizer-type GPT2BPETokenizer
#	                                                # from gotron preprocess
#	examples/gpt2-small.sh --text-data-path corpus.txt   # byte-level text
#	examples/gpt2-small.sh --go-stdlib-corpus --num-layers 4 --train-iters 50
#
# Later flags override earlier ones: any flag of `gotron train` may be
# added. On two cores one iteration of the full shape takes tens of
# seconds; shrink --num-layers or --seq-length to try it quickly.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL_ARGS=(
	--num-layers 12 --hidden-size 768 --num-attention-heads 12 --ffn-hidden-size 3072
	--seq-length 1024 --max-position-embeddings 1024
	--normalization LayerNorm --norm-epsilon 1e-5
	--position-embedding-type learned_absolute
	--init-method-std 0.02 --hidden-dropout 0.1 --attention-dropout 0.1
)
TRAINING_ARGS=(
	--micro-batch-size 1 --global-batch-size 8 --train-iters 20
	--lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine --lr-warmup-iters 2
	--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --clip-grad 1.0
	--log-interval 1 --eval-interval 10 --eval-iters 2
)
DATA_ARGS=()
case " $* " in
*" --data-path "* | *" --train-data-path "* | *" --text-data-path "* | *" --go-stdlib-corpus "* | *" --mock-data "*) ;;
*) DATA_ARGS=(--mock-data --vocab-size 50257) ;;
esac
[ -x bin/gotron ] || make build
exec bin/gotron train "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${DATA_ARGS[@]}" "$@"
