package tensorboard

import (
	"os"
	"testing"
	"time"
)

// FuzzRead: any bytes give scalars or an error, never a panic; what a
// Writer wrote reads back whole.
func FuzzRead(f *testing.F) {
	w, err := Create(f.TempDir(), Options{QueueSize: 1, Now: func() time.Time { return time.Unix(1, 0) }})
	if err != nil {
		f.Fatal(err)
	}
	w.Scalar("lm loss", 3.5, 7)
	w.Close()
	good, err := os.ReadFile(w.Path())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Read(b)
		if err == nil && len(b) == 0 && len(s) != 0 {
			t.Fatalf("scalars from no bytes: %v", s)
		}
	})
}

// TestRead: ReadFile gives back what the writer wrote, and names the
// offset of a corrupt record.
func TestRead(t *testing.T) {
	w, err := Create(t.TempDir(), Options{QueueSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	w.Scalar("a", 1.5, 1)
	w.Scalar("b", -2, 2)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(w.Path())
	if err != nil || len(got) != 2 || got[0].Tag != "a" || got[0].Value != 1.5 || got[1].Tag != "b" || got[1].Step != 2 || got[1].Value != -2 {
		t.Fatalf("%+v, %v", got, err)
	}
	b, _ := os.ReadFile(w.Path())
	b[len(b)-1] ^= 1
	if _, err := Read(b); err == nil {
		t.Error("a corrupt checksum was read")
	}
}
