package data_test

import (
	"fmt"

	"github.com/gotron/gotron/data"
)

func Example() {
	// Two data-parallel ranks each take two rows of step 7's global batch of four rows;
	// together they hold exactly the rows a single rank would read.
	var ds data.Dataset = data.MockDataset{Seed: 1234, Vocab: 50, Seq: 6}
	whole := ds.Batch(data.ConstantStep(7, 4), 0, 4)
	rank0, rank1 := ds.Batch(data.ConstantStep(7, 4), 0, 2), ds.Batch(data.ConstantStep(7, 4), 2, 2)
	fmt.Println(fmt.Sprint(whole.InputIDs) == fmt.Sprint(append(rank0.InputIDs, rank1.InputIDs...)))

	// A text corpus becomes byte tokens, documents ended by EndOfDocument.
	corpus := &data.Corpus{Docs: []data.Document{{Name: "a.go", Text: []byte("package a\n")}}}
	text, err := data.NewTextDataset(corpus, 4, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	var tok data.ByteTokenizer
	fmt.Println(text.NumSamples(), tok.Encode("pack"), fmt.Sprintf("%+q", tok.Decode([]int32{104, 105, 0xE2, 0x82})))
	// Output:
	// true
	// 2 [112 97 99 107] "hi\ufffd"
}
