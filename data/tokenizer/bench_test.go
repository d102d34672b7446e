package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// benchTexts are about 1 MB each of: Go source (the installed Go's src/net/http, a
// stand-in for code corpora), English prose (the fixture's paragraph, repeated), and the
// fixture's varied texts repeated (CJK, emoji, whitespace runs, words of 200–300 bytes).
func benchTexts(b *testing.B) map[string]string {
	const size = 1 << 20
	fill := func(parts ...string) string {
		var sb strings.Builder
		for sb.Len() < size {
			for _, p := range parts {
				sb.WriteString(p)
				sb.WriteByte('\n')
			}
		}
		return sb.String()
	}
	cases := readFixture(b, "gpt2_ids.json").Cases
	var varied []string
	for _, c := range cases {
		varied = append(varied, c.Text)
	}
	out := map[string]string{
		"prose":  fill(cases[len(cases)-1].Text),
		"varied": fill(varied...),
	}
	files, _ := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", "net", "http", "*.go"))
	sort.Strings(files)
	var src strings.Builder
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && src.Len() < size {
			src.Write(data)
		}
	}
	if src.Len() > 0 {
		out["gosource"] = src.String()
	}
	return out
}

// BenchmarkEncodeGPT2 encodes about 1 MB of text per iteration with GPT-2's vocabulary,
// one 4 KB document at a time, on one goroutine (MB/s is the throughput of one core).
func BenchmarkEncodeGPT2(b *testing.B) {
	for _, name := range []string{"gosource", "prose", "varied"} {
		text, ok := benchTexts(b)[name]
		if !ok {
			continue
		}
		var docs []string
		for len(text) >= 4096 {
			docs = append(docs, text[:4096])
			text = text[4096:]
		}
		b.Run(name, func(b *testing.B) {
			tok := mustNew(b, Options{Type: TypeGPT2BPE})
			b.SetBytes(int64(len(docs) * 4096))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, d := range docs {
					tok.Encode(d)
				}
			}
		})
	}
}

// BenchmarkEncodeGPT2Parallel encodes Go source on every core with one shared tokenizer.
func BenchmarkEncodeGPT2Parallel(b *testing.B) {
	text, ok := benchTexts(b)["gosource"]
	if !ok {
		b.Skip("no Go source")
	}
	tok := mustNew(b, Options{Type: TypeGPT2BPE})
	b.SetBytes(4096)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		off := 0
		for pb.Next() {
			if off+4096 > len(text) {
				off = 0
			}
			tok.Encode(text[off : off+4096])
			off += 4096
		}
	})
}
