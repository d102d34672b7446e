package tokenizer

import (
	"slices"
	"testing"
)

// TestNull: Megatron-Core's NullTokenizer: --vocab-size N gives N ids and EOD N−1; the text
// is space-separated integers.
func TestNull(t *testing.T) {
	tok := mustNew(t, Options{Type: TypeNull, VocabSize: 1000})
	if tok.VocabSize() != 1000 || tok.EOD() != 999 || tok.Name() != "NullTokenizer" {
		t.Fatalf("VocabSize %d EOD %d Name %q, want 1000, 999, NullTokenizer", tok.VocabSize(), tok.EOD(), tok.Name())
	}
	if got := tok.Encode("15 496 0 999"); !slices.Equal(got, []int32{15, 496, 0, 999}) {
		t.Errorf("Encode = %v", got)
	}
	if got := tok.Decode([]int32{15, 496, 0, 999}); got != "15 496 0 999" {
		t.Errorf("Decode = %q", got)
	}
	// Any whitespace separates; what is not an id in [0, 1000) is skipped.
	if got := tok.Encode(" 1\t2\n\n3  x 1000 -1 4 "); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Errorf("Encode (lenient) = %v, want [1 2 3 4]", got)
	}
	if got := tok.Encode(""); len(got) != 0 {
		t.Errorf("Encode(\"\") = %v", got)
	}
	checked := tok.(CheckedEncoder)
	if _, err := checked.EncodeChecked("1 2 1000"); err == nil {
		t.Error("EncodeChecked accepted 1000 with --vocab-size 1000")
	}
	if ids, err := checked.EncodeChecked("7 8"); err != nil || !slices.Equal(ids, []int32{7, 8}) {
		t.Errorf("EncodeChecked(7 8) = %v, %v", ids, err)
	}
	for _, n := range []int{0, -5} {
		if _, err := New(Options{Type: TypeNull, VocabSize: n}); err == nil {
			t.Errorf("--vocab-size %d accepted", n)
		} else {
			checkErr(t, err, "--vocab-size")
		}
	}
}
