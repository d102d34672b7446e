package gpt_test

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/tensor/rng"
)

// lossOf builds the model on tpg (nil: one rank) from seed 1 and returns
// the mean loss of one batch of mock data, after its backward pass.
func lossOf(cfg config.TransformerConfig, tpg comm.Group) (float32, error) {
	m, err := gpt.NewParallel(cfg, rng.New(1), tpg)
	if err != nil {
		return 0, err
	}
	b := data.MockDataset{Seed: 7, Vocab: cfg.VocabSize, Seq: cfg.SeqLength}.Batch(data.ConstantStep(0, 2), 0, 2)
	tape := autograd.NewTape(context.Background())
	losses, err := m.Forward(tape, b.InputIDs, b.Labels, b.Rows, b.Seq, nil)
	if err != nil {
		return 0, err
	}
	loss := gpt.MaskedMeanLoss(tape, losses, b, 1)
	return loss.Value.Data()[0], autograd.Backward(tape, loss, nil)
}

// A two-layer GPT trains one batch on one rank, and again split over two
// tensor-parallel ranks (goroutines of this process): every rank starts
// from the same weights (each keeps its slice of the whole model's), so
// the loss is the same.
func Example() {
	cfg := config.DefaultTransformerConfig()
	cfg.NumLayers, cfg.HiddenSize, cfg.NumAttentionHeads = 2, 32, 4
	cfg.SeqLength, cfg.VocabSize = 16, 64
	cfg.HiddenDropout, cfg.AttentionDropout = 0, 0
	fmt.Println("parameters:", gpt.NumParameters(cfg))

	one, err := lossOf(cfg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("one rank:  loss %.4f\n", one)

	cfg.TensorModelParallelSize = 2
	losses := make([]float32, 2)
	err = local.NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		l, err := lossOf(cfg, g)
		losses[g.Rank()] = l
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("TP 2:      loss %.4f on rank 0, %.4f on rank 1\n", losses[0], losses[1])
	// Output:
	// parameters: 28032
	// one rank:  loss 4.1497
	// TP 2:      loss 4.1497 on rank 0, 4.1497 on rank 1
}
