package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt/hf"
	"github.com/gotron/gotron/ckpt/safetensors"
)

// sameTensors fails unless a and b hold the same names, shapes and bytes.
func sameTensors(t *testing.T, a, b []safetensors.Tensor) {
	t.Helper()
	byName := map[string]safetensors.Tensor{}
	for _, x := range b {
		byName[x.Name] = x
	}
	if len(a) != len(b) {
		t.Fatalf("%d tensors, want %d", len(a), len(b))
	}
	for _, x := range a {
		y, ok := byName[x.Name]
		if !ok || !bytes.Equal(x.Data, y.Data) || len(x.Shape) != len(y.Shape) {
			t.Errorf("tensor %s differs (present %v)", x.Name, ok)
		}
	}
}

// TestConvertHF: each Hugging Face fixture (tools/torchref/hf_ref.py)
// converted --from-hf into a gotron checkpoint and that --to-hf gives the
// fixture's tensors bit for bit (the logits are checked against PyTorch in
// ckpt/hf); training then starts from the converted checkpoint with
// --finetune --use-checkpoint-args, and from a trained gotron checkpoint
// --to-hf writes a model whose import is that checkpoint's weights.
func TestConvertHF(t *testing.T) {
	for _, name := range []string{"hf_gpt2", "hf_llama"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("..", "..", "testdata", name)
			dir := t.TempDir()
			ck, back := filepath.Join(dir, "gotron"), filepath.Join(dir, "hf")
			out, err := run(t, "ckpt", "convert", "--from-hf", src, ck)
			if err != nil || !strings.Contains(out, "--finetune --use-checkpoint-args") {
				t.Fatalf("--from-hf: %v\n%s", err, out)
			}
			if out, err := run(t, "ckpt", "convert", "--to-hf", "--gpt2-tokenizer", ck, back); err != nil {
				t.Fatalf("--to-hf: %v\n%s", err, out)
			}
			for _, f := range []string{"vocab.json", "merges.txt"} {
				if fi, err := os.Stat(filepath.Join(back, f)); err != nil || fi.Size() < 100000 {
					t.Errorf("--gpt2-tokenizer: %s: %v", f, err)
				}
			}
			want, err := hf.Read(src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := hf.Read(back)
			if err != nil {
				t.Fatal(err)
			}
			sameTensors(t, got.Tensors, want.Tensors)

			// Fine-tune from the converted checkpoint, then export that: at
			// learning rate 0 the export is the fixture again (the weights
			// went through train's load and save untouched), at 1e-3 it
			// differs and still imports.
			for _, lr := range []string{"0", "1e-3"} {
				tuned, tunedHF := filepath.Join(dir, "tuned"+lr), filepath.Join(dir, "tuned-hf"+lr)
				out, err = run(t, "train", "--load", ck, "--finetune", "--use-checkpoint-args", "--make-vocab-size-divisible-by", "1",
					"--mock-data", "--seq-length", "8", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "2",
					"--eval-iters", "0", "--lr", lr, "--min-lr", "0", "--save", tuned, "--log-interval", "1")
				if err != nil {
					t.Fatalf("fine-tuning from the converted checkpoint at lr %s: %v\n%s", lr, err, out)
				}
				if out, err := run(t, "ckpt", "convert", "--to-hf", tuned, tunedHF); err != nil {
					t.Fatalf("--to-hf of the fine-tuned checkpoint: %v\n%s", err, out)
				}
				m, err := hf.Read(tunedHF)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := hf.Import(m); err != nil || m.Family() != want.Family() {
					t.Errorf("the fine-tuned export (%s) does not import: %v", m.Family(), err)
				}
				if lr == "0" {
					sameTensors(t, m.Tensors, want.Tensors)
					continue
				}
				same := true
				for i := range m.Tensors {
					same = same && bytes.Equal(m.Tensors[i].Data, got.Tensors[i].Data)
				}
				if same {
					t.Error("fine-tuning at lr 1e-3 changed no weight: the export is not the trained model")
				}
			}
		})
	}
}

// TestConvertHFErrors: the conversions' refusals, each naming the cause.
func TestConvertHFErrors(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "hf_gpt2")
	ck := filepath.Join(dir, "ck")
	if _, err := run(t, "ckpt", "convert", "--from-hf", src, ck); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"model_type": "gpt2"`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-hf", src, ck}, "already exists"},
		{[]string{"--from-hf", dir, filepath.Join(dir, "x")}, "config.json"},
		{[]string{"--to-hf", src, filepath.Join(dir, "y")}, "not a gotron checkpoint"},
		{[]string{"--to-hf", "--vocab-file", "v.json", ck, filepath.Join(dir, "z")}, "go together"},
		{[]string{"--from-hf", "--tokenizer-model", "t.json", src, filepath.Join(dir, "w")}, "--to-hf writes"},
		{[]string{"--to-hf", "--from-hf", src, filepath.Join(dir, "v")}, "exactly one"},
		{[]string{"--from-hf", bad, filepath.Join(dir, "u")}, "not a JSON object"},
	} {
		if _, err := run(t, append([]string{"ckpt", "convert"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
