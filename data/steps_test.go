package data

import (
	"slices"
	"strings"
	"testing"
)

// The schedule of Megatron's own GPT-3 175B example script, whose
// thresholds count tokens (seq_length 2048).
const gpt3Schedule = "0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536"

func TestParseStepSchedule(t *testing.T) {
	for _, c := range []struct {
		in   string
		seq  int
		want string
	}{
		{gpt3Schedule, 2048, "0:16 1171875:320 2343750:624 3515625:928 4687500:1232 5859375:1536"},
		{gpt3Schedule, 0, "0:16 2400000000:320 4800000000:624 7200000000:928 9600000000:1232 12000000000:1536"},
		// The reference's docstring example, in samples.
		{"0:768 61035156250:1536", 0, "0:768 61035156250:1536"},
		// Any order, commas, lower-case suffixes, suffixed batches.
		{"500:64,0:32 1k:1.5K", 0, "0:32 500:64 1000:1500"},
		// A threshold below one sequence is sample 0.
		{"100:16 4096:32", 2048, "0:16 2:32"},
		// Batches may go down.
		{"0:64 1M:32", 0, "0:64 1000000:32"},
	} {
		s, err := ParseStepSchedule(c.in, c.seq)
		if err != nil {
			t.Errorf("ParseStepSchedule(%q, %d): %v", c.in, c.seq, err)
			continue
		}
		if got := s.String(); got != c.want {
			t.Errorf("ParseStepSchedule(%q, %d) = %q, want %q", c.in, c.seq, got, c.want)
		}
	}
}

func TestParseStepScheduleRefuses(t *testing.T) {
	for _, c := range []struct {
		in   string
		seq  int
		want string
	}{
		{"", 0, "no entries"},
		{" , ", 0, "no entries"},
		{"16", 0, "not THRESHOLD:BATCH"},
		{"100:16", 0, "not 0"},
		{"0:16 100:32 100:64", 0, "two thresholds at 100"},
		// Two token thresholds in the same sample.
		{"0:16 2048:32 3000:64", 2048, "two thresholds at 1 samples"},
		{"0:0", 0, "must be positive"},
		{"0:-4", 0, "negative"},
		{"-1:16 0:8", 0, "negative"},
		{"0:x", 0, "not a number"},
		{"0:16 NaN:32", 0, "not a number"},
		{"0:16 inf:32", 0, "not a number"},
		{"0:16 1e30:32", 0, "too large"},
		{"0:3T", 0, "beyond any run"},
		{"0:16 1X:32", 0, "not a number"},
	} {
		_, err := ParseStepSchedule(c.in, c.seq)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseStepSchedule(%q, %d) = %v, want an error with %q", c.in, c.seq, err, c.want)
		}
	}
}

// The reference's unit test of a schedule whose first entries are below
// micro × dp after a scale-up (test_num_microbatches_calculator.py).
func TestStepScheduleGlobalBatch(t *testing.T) {
	s, err := ParseStepSchedule("0:256 200000:512 600000:1024 1500000:2048 3000000:4096 6000000:6144", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		consumed int64
		want     int
	}{{0, 256}, {199999, 256}, {200000, 512}, {1500000, 2048}, {2999999, 2048}, {6000000, 6144}, {1 << 50, 6144}} {
		if got := s.GlobalBatch(c.consumed); got != c.want {
			t.Errorf("GlobalBatch(%d) = %d, want %d", c.consumed, got, c.want)
		}
	}
	if s.Last() != 6144 {
		t.Errorf("Last() = %d, want 6144", s.Last())
	}
}

// walk is the reference's loop, one iteration at a time: the batches of
// iters iterations after consumed samples.
func walk(s StepSchedule, consumed int64, iters int) []int {
	var out []int
	for range iters {
		b := s.GlobalBatch(consumed)
		out = append(out, b)
		consumed += int64(b)
	}
	return out
}

// TestStepScheduleRunAndIterations checks Run and Iterations, which jump
// an entry at a time, against the iteration-at-a-time walk.
func TestStepScheduleRunAndIterations(t *testing.T) {
	for _, in := range []string{"0:4", "0:4 10:8", "0:3 7:5 8:2 40:6", "0:8 9:4 10:16 11:1", "0:5 1:7 2:9 100:3"} {
		s, err := ParseStepSchedule(in, 0)
		if err != nil {
			t.Fatal(err)
		}
		for from := int64(0); from < 60; from += 7 {
			for iters := 0; iters < 30; iters++ {
				want := walk(s, from, iters)
				var got []int
				end := s.Run(from, iters, func(b, n int) {
					for range n {
						got = append(got, b)
					}
				})
				sum := from
				for _, b := range want {
					sum += int64(b)
				}
				if !slices.Equal(got, want) || end != sum {
					t.Fatalf("%q: Run(%d, %d) = %v ending at %d, want %v ending at %d", in, from, iters, got, end, want, sum)
				}
			}
		}
		for samples := int64(0); samples < 200; samples++ {
			want, c := 0, int64(0)
			for c+int64(s.GlobalBatch(c)) <= samples {
				c += int64(s.GlobalBatch(c))
				want++
			}
			if got := s.Iterations(samples); got != want {
				t.Fatalf("%q: Iterations(%d) = %d, want %d", in, samples, got, want)
			}
		}
	}
}

// Megatron's own schedule over its 500,000 iterations: Run takes one step
// per entry, and the samples match the per-iteration sum.
func TestStepScheduleLongRun(t *testing.T) {
	s, err := ParseStepSchedule(gpt3Schedule, 2048)
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	end := s.Run(0, 500000, func(int, int) { steps++ })
	var want int64
	for _, b := range walk(s, 0, 500000) {
		want += int64(b)
	}
	if end != want || steps != len(s) {
		t.Fatalf("Run over 500000 iterations: %d samples in %d steps, want %d in %d", end, steps, want, len(s))
	}
	if got := s.Iterations(end); got != 500000 {
		t.Fatalf("Iterations(%d) = %d, want 500000", end, got)
	}
}

// FuzzParseStepSchedule: any text parses or is refused without a panic; a
// parsed schedule keeps its rules and reads back from its samples form.
func FuzzParseStepSchedule(f *testing.F) {
	for _, seed := range []string{gpt3Schedule, "0:768 250B:1536 500B:3072 750B:6144", "0:16,100:32", "1k:2 0:1", "0:1e3", "0:16 x:1", "", "0:0"} {
		f.Add(seed, 2048)
		f.Add(seed, 0)
	}
	f.Fuzz(func(t *testing.T, in string, seq int) {
		s, err := ParseStepSchedule(in, seq)
		if err != nil {
			return
		}
		if s[0].From != 0 {
			t.Fatalf("%q: starts at %d", in, s[0].From)
		}
		for i, e := range s {
			if e.Batch <= 0 || i > 0 && e.From <= s[i-1].From {
				t.Fatalf("%q: entry %d is %+v after %+v", in, i, e, s[max(i-1, 0)])
			}
		}
		back, err := ParseStepSchedule(s.String(), 0)
		if err != nil || !slices.Equal(back, s) {
			t.Fatalf("%q: %q reads back as %v, %v", in, s.String(), back, err)
		}
	})
}
