package data

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestByteTokenizer(t *testing.T) {
	var tok ByteTokenizer
	if tok.Vocab() != 256 {
		t.Errorf("Vocab() = %d", tok.Vocab())
	}
	s := "func main() { println(\"héllo, 世界\") }\n"
	ids := tok.Encode(s)
	if len(ids) != len(s) || ids[0] != 'f' || ids[len(ids)-1] != '\n' {
		t.Errorf("Encode = %v", ids)
	}
	// é is U+00E9, UTF-8 0xC3 0xA9.
	if want := []int32{'h', 0xC3, 0xA9}; !reflect.DeepEqual(tok.Encode("hé"), want) {
		t.Errorf("Encode(hé) = %v, want %v", tok.Encode("hé"), want)
	}
	if got := tok.Decode(ids); got != s {
		t.Errorf("Decode(Encode(s)) = %q", got)
	}
	cases := []struct {
		ids  []int32
		want string
	}{
		{[]int32{'a', 0xC3, 'b'}, "a\uFFFDb"},          // truncated two-byte sequence
		{[]int32{0xFF, 0xFE, 'x'}, "\uFFFDx"},          // invalid bytes, one replacement per run
		{[]int32{'a', 300, -1, 'b'}, "a\uFFFD\uFFFDb"}, // ids outside the vocabulary
		{[]int32{0xE4, 0xB8, 0x96}, "世"},               // complete three-byte sequence
		{nil, ""},
	}
	for _, c := range cases {
		got := tok.Decode(c.ids)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
}
