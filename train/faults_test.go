package train

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseFaults(t *testing.T) {
	got, err := ParseFaults("kill@1:5, slow=2.5@0:2,nan@3:1,hang@0:7,bitflip@2:9")
	want := []Fault{{FaultKill, 1, 5, 0}, {FaultSlow, 0, 2, 2.5}, {FaultNaN, 3, 1, 0}, {FaultHang, 0, 7, 0}, {FaultBitflip, 2, 9, 0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"kill", "kill@1", "kill@x:2", "kill@1:0", "kill@-1:2", "slow@1:2", "slow=0.5@1:2", "slow=NaN@1:2", "nan=2@1:2", "boom@1:2"} {
		if _, err := ParseFaults(bad); err == nil || !strings.Contains(err.Error(), "--inject-fault") {
			t.Errorf("ParseFaults(%q) = %v, want an error naming the flag", bad, err)
		}
	}
}

// FuzzParseFaults: any text parses or is refused, without a panic; what
// parses has a known kind, a rank, an iteration from 1, and slow's factor.
func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{"kill@1:5", "slow=3@0:2,nan@1:1", "hang@0:3", "bitflip@2:9", "x@y:z", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		faults, err := ParseFaults(s)
		if err != nil {
			return
		}
		for _, x := range faults {
			ok := x.Rank >= 0 && x.Iter >= 1
			switch x.Kind {
			case FaultSlow:
				ok = ok && x.Factor >= 1
			case FaultKill, FaultHang, FaultNaN, FaultBitflip:
				ok = ok && x.Factor == 0
			default:
				ok = false
			}
			if !ok {
				t.Fatalf("%q gave %+v", s, x)
			}
		}
	})
}

// TestInjectedFaults: nan stops the run at its check, naming the rank's
// place, iteration and micro-batch; hang stops the other rank's next
// collective at --distributed-timeout-minutes, the run ending with it (or,
// with --inprocess-restart, resuming to the uninterrupted losses);
// bitflip under validate_results with --check-for-spiky-loss is a spike
// the rerun does not reproduce: a transient fault on the injected rank,
// and the run goes on to the uninterrupted losses bit for bit.
func TestInjectedFaults(t *testing.T) {
	a := mockArgs(4)
	a.WorldSize, a.InjectFault = 2, "nan@1:3"
	_, err := Run(context.Background(), a, Options{})
	if want := "found NaN in the local loss of micro-batch 0 (tensor-parallel rank 0, data-parallel rank 1)"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "rank 1: iteration 3") {
		t.Errorf("nan: %v, want %q", err, want)
	}

	a.InjectFault, a.DistributedTimeoutMinutes = "hang@1:2", 0.02
	_, err = Run(context.Background(), a, Options{})
	if err == nil || !strings.Contains(err.Error(), "timed out") && !strings.Contains(err.Error(), "timeout") {
		t.Errorf("hang: %v, want a collective's timeout", err)
	}

	// With --inprocess-restart the hung run resumes from its checkpoint
	// and ends as the uninterrupted one.
	c := mockArgs(6)
	c.WorldSize, c.Save, c.SaveInterval = 2, t.TempDir(), 2
	whole, err := Run(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Save = t.TempDir()
	c.InjectFault, c.DistributedTimeoutMinutes, c.InprocessRestart = "hang@1:4", 0.02, true
	res, err := Run(context.Background(), c, Options{})
	if err != nil || res.Restarts != 1 || fmt.Sprint(res.Losses) != fmt.Sprint(whole.Losses[res.StartIteration:]) {
		t.Errorf("hang with --inprocess-restart: %+v, %v; uninterrupted losses %v", res, err, whole.Losses)
	}

	args := func() Args {
		a := mockArgs(30) // 4 micro-batches per rank: 100 losses by iteration 25
		a.WorldSize, a.RerunMode, a.CheckForSpikyLoss, a.LogInterval = 2, RerunValidateResults, true, 1
		return a
	}
	full, err := Run(context.Background(), args(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := args()
	b.InjectFault = "bitflip@1:28"
	var out strings.Builder
	res, err = Run(context.Background(), b, Options{Out: &out})
	if err != nil || fmt.Sprint(res.Losses) != fmt.Sprint(full.Losses) {
		t.Fatalf("bitflip: %v; losses %v, uninterrupted %v", err, res, full.Losses)
	}
	if want := "iteration 28: the rerun did not reproduce the first run (the local loss of micro-batch 0 on rank 1:"; !strings.Contains(out.String(), want) {
		t.Errorf("bitflip: the output lacks %q:\n%s", want, out.String())
	}
}
