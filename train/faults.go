package train

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Fault is one --inject-fault KIND@RANK:ITER: from iteration Iter on rank
// Rank, Kind happens (Factor is slow's).
type Fault struct {
	Kind   string
	Rank   int
	Iter   int
	Factor float64
}

// The kinds of --inject-fault.
const (
	FaultKill    = "kill"    // the rank fails before the iteration
	FaultHang    = "hang"    // the rank stops before the iteration, until the run ends
	FaultSlow    = "slow"    // slow=F: the rank's forward computations take F times as long from the iteration on
	FaultNaN     = "nan"     // the rank's local loss of micro-batch 0 is NaN in the iteration, every time it runs
	FaultBitflip = "bitflip" // a bit of the rank's local loss of micro-batch 0 flips in the iteration's first run
)

// ParseFaults reads --inject-fault's comma-separated KIND@RANK:ITER list:
// kill@1:5, hang@0:3, slow=3@1:2, nan@1:4, bitflip@0:6.
func ParseFaults(s string) ([]Fault, error) {
	var out []Fault
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		kind, where, ok := strings.Cut(f, "@")
		r, it, ok2 := strings.Cut(where, ":")
		if !ok || !ok2 {
			return nil, fmt.Errorf("--inject-fault %q is not KIND@RANK:ITER (for example kill@1:5 or slow=3@0:2)", f)
		}
		x := Fault{Kind: kind}
		if k, v, slow := strings.Cut(kind, "="); slow {
			factor, err := strconv.ParseFloat(v, 64)
			if k != FaultSlow || err != nil || !(factor >= 1) || math.IsInf(factor, 0) {
				return nil, fmt.Errorf("--inject-fault %q: only slow takes a value, a factor of at least 1 (slow=3)", f)
			}
			x.Kind, x.Factor = FaultSlow, factor
		}
		switch x.Kind {
		case FaultKill, FaultHang, FaultNaN, FaultBitflip:
		case FaultSlow:
			if x.Factor == 0 {
				return nil, fmt.Errorf("--inject-fault %q: slow needs its factor (slow=3)", f)
			}
		default:
			return nil, fmt.Errorf("--inject-fault %q: the kind %q is not kill, hang, slow=F, nan or bitflip", f, x.Kind)
		}
		var err error
		if x.Rank, err = strconv.Atoi(r); err != nil || x.Rank < 0 {
			return nil, fmt.Errorf("--inject-fault %q: the rank %q is not a rank number", f, r)
		}
		if x.Iter, err = strconv.Atoi(it); err != nil || x.Iter < 1 {
			return nil, fmt.Errorf("--inject-fault %q: the iteration %q is not a number from 1", f, it)
		}
		out = append(out, x)
	}
	return out, nil
}

// faultAt returns the fault of kind on world rank rank at iteration it
// (slow: from it on), if any.
func faultAt(faults []Fault, kind string, rank, it int) (Fault, bool) {
	for _, f := range faults {
		if f.Kind == kind && f.Rank == rank && (f.Iter == it || kind == FaultSlow && it >= f.Iter) {
			return f, true
		}
	}
	return Fault{}, false
}

// flipBit returns v with the highest 0 bit of its exponent flipped: a
// bitflip that makes a loss of ordinary size 2^(2^k) times larger.
func flipBit(v float32) float32 {
	b := math.Float32bits(v)
	for k := 30; k >= 23; k-- {
		if b&(1<<k) == 0 {
			return math.Float32frombits(b | 1<<k)
		}
	}
	return v
}

// injectFault, when set (by a test), is called by every rank before each
// iteration (its world rank, the iteration about to run); an error fails
// the rank there, as a fault would.
var injectFault func(rank, iteration int) error

// injectedStop is --inject-fault kill and hang, before an iteration: the
// rank fails with an error, or stops until the run ends around it (its
// peers' collectives time out after --distributed-timeout-minutes).
func (t *trainer) injectedStop(ctx context.Context) error {
	rank, it := t.groups.World.Rank(), t.iteration+1
	if _, ok := faultAt(t.faults, FaultKill, rank, it); ok {
		return fmt.Errorf("--inject-fault kill@%d:%d: the rank fails here", rank, it)
	}
	if _, ok := faultAt(t.faults, FaultHang, rank, it); ok {
		<-ctx.Done()
		return fmt.Errorf("--inject-fault hang@%d:%d: the rank hung here until the run ended: %w", rank, it, ctx.Err())
	}
	return nil
}
