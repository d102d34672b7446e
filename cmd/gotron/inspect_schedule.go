package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/pp"
)

// scheduleFlags are the settings of `gotron inspect schedule`.
type scheduleFlags struct {
	cfg                       pp.Config
	numMicrobatches           int
	globalBatch, microBatch   int
	worldSize, tensorParallel int
	asJSON                    bool
	stageTimes                []float64
	svg                       string
}

func newInspectScheduleCmd() *cobra.Command {
	var f scheduleFlags
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Print every pipeline rank's schedule: warmup counts, compute order, sends, receives and waits",
		Long: `schedule builds each pipeline rank's forward-backward schedule as the
reference's get_forward_backward_func would run it (no pipelining, 1F1B, or
interleaved 1F1B with --virtual-pipeline-model-parallel-size), or ZB-H1 and ZB-H2
with --pipeline-schedule zb-h1 or zb-h2 (W: a split backward's weight gradients),
or ZB-V and DualPipeV with --pipeline-schedule zb-v or dualpipev and
--virtual-pipeline-model-parallel-size 2 (rank r's chunk 0 holds stage r and its
chunk 1 stage 2P−1−r), plays the ranks
against each other to check that it completes, and prints a grid of the
actions (one row per rank) with each rank's peak of live activations, or with
--json {"pp","vpp","microbatches","group_size","ranks":[{"rank","warmup",
"remaining","order"}]}, where order is the signed compute order (+c forward,
−c backward of 1-based chunk c).

With --stage-times F,B,W[,C] it also plays the ranks' lists with those
durations (pp.Simulate) and prints the makespan, the longest stage's time from
its first computation to its end, and the bubble rate
(makespan − M·V·(F+B+W)) / makespan; --json adds
"simulated": {"makespan", "bubble_rate"}. --svg FILE draws the simulated
iteration, one row per rank, as gotron train --profile-schedule draws a
measured one.

The number of microbatches is --num-microbatches, or
--global-batch-size / (--micro-batch-size × data-parallel size) with the
data-parallel size --world-size / (--tensor-model-parallel-size ×
--pipeline-model-parallel-size).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := f.microbatches()
			if err != nil {
				return err
			}
			f.cfg.Microbatches = m
			if err := f.overlapDefault(cmd); err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			// gotron train always deallocates pipeline outputs (the
			// training layer's setting), which changes where the
			// interleaved schedule waits for overlapped sends.
			f.cfg.DeallocatePipelineOutputs = true
			ss, err := pp.BuildAll(f.cfg)
			if err != nil {
				return err
			}
			// gotron's communicator matches messages per pair of ranks:
			// at P = 2 one queue carries both kinds, unless the schedule
			// carries gradients apart (the V placement's second group).
			res, err := pp.VerifyWith(ss, pp.VerifyOptions{SharedPairFIFO: f.cfg.PP == 2 && !ss[0].GradientsApart()})
			if err != nil {
				return err
			}
			sim, err := f.simulate(ss)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.asJSON {
				if f.svg != "" {
					if err := sim.Timeline.WriteSVG(f.svg); err != nil {
						return err
					}
				}
				j, err := pp.FormatJSON(ss)
				if err != nil {
					return err
				}
				if j, err = withSimulation(j, sim); err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", j)
				return err
			}
			fmt.Fprint(out, pp.FormatGrid(ss))
			for r, n := range res.PeakLive {
				w := ""
				if ss[r].SplitBackward {
					w = fmt.Sprintf(", %d weight gradients", count(ss[r], pp.WeightGrad))
				}
				fmt.Fprintf(out, "rank %d: %d forwards, %d backwards%s, peak of %d live activations\n",
					r, count(ss[r], pp.Forward), count(ss[r], pp.Backward), w, n)
			}
			if sim != nil {
				fmt.Fprintf(out, "simulated with F %g, B %g, W %g, comm %g: makespan %.6g, bubble rate %.4f ((makespan − M·V·(F+B+W)) / makespan)\n",
					f.stageTimes[0], f.stageTimes[1], f.stageTimes[2], f.stageTimes[3], sim.Makespan, sim.BubbleRate)
			}
			if f.svg != "" {
				if err := sim.Timeline.WriteSVG(f.svg); err != nil {
					return err
				}
				fmt.Fprintf(out, "drew the simulated iteration in %s\n", f.svg)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.cfg.PP, "pipeline-model-parallel-size", 1, "pipeline-parallel size P")
	fl.IntVar(&f.cfg.VPP, "virtual-pipeline-model-parallel-size", 0, "model chunks per pipeline rank V (0: unset, the non-interleaved schedule)")
	fl.IntVar(&f.cfg.GroupSize, "microbatch-group-size-per-virtual-pipeline-stage", 0, "microbatches run per chunk in a row, G (0: P)")
	fl.IntVar(&f.numMicrobatches, "num-microbatches", 0, "microbatches per iteration M (0: derive from the batch sizes)")
	fl.IntVar(&f.globalBatch, "global-batch-size", 0, "rows per iteration over all data-parallel ranks")
	fl.IntVar(&f.microBatch, "micro-batch-size", 1, "rows of a microbatch")
	fl.IntVar(&f.worldSize, "world-size", 0, "number of ranks (0: tensor × pipeline size, data-parallel size 1)")
	fl.IntVar(&f.tensorParallel, "tensor-model-parallel-size", 1, "tensor-parallel size")
	fl.StringVar(&f.cfg.Schedule, "pipeline-schedule", "", "1f1b (the default), zb-h1, zb-h2, zb-v or dualpipev (zero-bubble: each backward split, its weight gradients deferred into the bubble; zb-h2 with 2P-1 microbatches in flight; zb-v and dualpipev with two chunks per rank in a V)")
	fl.BoolVar(&f.cfg.ForwardOnly, "forward-only", false, "forward passes only (evaluation)")
	fl.BoolVar(&f.cfg.OverlapP2PComm, "overlap-p2p-communication", false, "overlap pipeline sends and receives with compute (interleaved schedule; the default there, as in gotron train)")
	fl.Bool("no-overlap-p2p-communication", false, "batch pipeline sends and receives instead of overlapping them (interleaved schedule)")
	fl.BoolVar(&f.cfg.OverlapP2PCommWarmupFlush, "overlap-p2p-communication-warmup-flush", false, "also overlap them in the warmup and cooldown")
	fl.BoolVar(&f.asJSON, "json", false, "print the ranks' warmup counts and orders as JSON")
	fl.StringVar(&f.svg, "svg", "", "draw the simulated iteration (--stage-times) into this SVG file, as gotron train --profile-schedule draws a measured one")
	fl.BoolVar(&f.cfg.DeferEmbeddingWgrad, "defer-embedding-wgrad-compute", false, "defer the last stage's output-layer weight gradients to the flush (an emb_wgrad action, E in the grid)")
	fl.IntVar(&f.cfg.WgradDeferralLimit, "wgrad-deferral-limit", 0, "with --defer-embedding-wgrad-compute, defer the last this many microbatches (0: all)")
	fl.Float64SliceVar(&f.stageTimes, "stage-times", nil, "F,B,W[,C]: simulate the schedule with these times of a forward, a backward's input gradient, its weight gradients (an unsplit backward takes B+W) and a message, and print the makespan and the bubble rate")
	return cmd
}

// microbatches returns M from --num-microbatches or the batch sizes.
func (f *scheduleFlags) microbatches() (int, error) {
	if f.numMicrobatches != 0 || f.globalBatch == 0 {
		if f.numMicrobatches < 1 {
			return 0, fmt.Errorf("--num-microbatches = %d: give at least 1, or --global-batch-size and --micro-batch-size to derive it", f.numMicrobatches)
		}
		return f.numMicrobatches, nil
	}
	tp, p := f.tensorParallel, f.cfg.PP
	if tp < 1 || p < 1 || f.microBatch < 1 {
		return 0, fmt.Errorf("--tensor-model-parallel-size %d, --pipeline-model-parallel-size %d and --micro-batch-size %d must each be ≥ 1", tp, p, f.microBatch)
	}
	world := f.worldSize
	if world == 0 {
		world = tp * p
	}
	if world%(tp*p) != 0 {
		return 0, fmt.Errorf("--world-size %d is not divisible by tensor × pipeline size = %d × %d = %d: choose a multiple of %d", world, tp, p, tp*p, tp*p)
	}
	dp := world / (tp * p)
	rows := f.microBatch * dp
	if f.globalBatch%rows != 0 || f.globalBatch < rows {
		return 0, fmt.Errorf("--global-batch-size %d is not a positive multiple of --micro-batch-size × data-parallel size = %d × %d = %d: "+
			"choose a multiple of %d (e.g. %d)", f.globalBatch, f.microBatch, dp, rows, rows, max(rows, f.globalBatch/rows*rows))
	}
	return f.globalBatch / rows, nil
}

// overlapDefault applies gotron train's default: overlapped communication
// with the interleaved schedule unless --no-overlap-p2p-communication; an
// explicit --overlap-p2p-communication without it stays set, and Build
// refuses it.
func (f *scheduleFlags) overlapDefault(cmd *cobra.Command) error {
	fl := cmd.Flags()
	on, off := fl.Changed("overlap-p2p-communication"), fl.Changed("no-overlap-p2p-communication")
	switch {
	case on && off:
		return fmt.Errorf("--overlap-p2p-communication and --no-overlap-p2p-communication contradict each other: give one")
	case off:
		v, _ := fl.GetBool("no-overlap-p2p-communication")
		f.cfg.OverlapP2PComm = !v
	case !on:
		f.cfg.OverlapP2PComm = f.cfg.VPP > 0 && f.cfg.PP > 1 && pp.PlacementOf(f.cfg.Schedule) == config.PlacementLoop
	}
	return nil
}

// check applies the training layer's rules on top of the schedule's own:
// batch_p2p_comm is the opposite of overlap_p2p_comm (Megatron-LM's
// arguments), and the interleaved schedule without overlap needs P > 2,
// since with two stages the next and the previous rank are one peer
// within a batch (Megatron-LM issue #750).
func (f *scheduleFlags) check() error {
	f.cfg.BatchP2PComm = !f.cfg.OverlapP2PComm && !pp.ZeroBubble(f.cfg.Schedule)
	if f.cfg.VPP > 0 && f.cfg.PP == 2 && !f.cfg.OverlapP2PComm && pp.PlacementOf(f.cfg.Schedule) == config.PlacementLoop {
		return fmt.Errorf("the interleaved schedule (--virtual-pipeline-model-parallel-size %d) without --overlap-p2p-communication needs "+
			"--pipeline-model-parallel-size > 2 (here 2): with two stages the next and the previous stage are the same peer within one batch; "+
			"add --overlap-p2p-communication, or use ≥ 3 stages, or drop --virtual-pipeline-model-parallel-size", f.cfg.VPP)
	}
	return nil
}

func count(s *pp.Schedule, k pp.Kind) int {
	n := 0
	for _, a := range s.Actions {
		if a.Kind == k {
			n++
		}
	}
	return n
}

// simulate plays the schedules with --stage-times (nil without it).
func (f *scheduleFlags) simulate(ss []*pp.Schedule) (*pp.Simulation, error) {
	switch len(f.stageTimes) {
	case 0:
		if f.svg != "" {
			return nil, fmt.Errorf("--svg %s draws the simulated iteration: give --stage-times F,B,W[,C] too", f.svg)
		}
		return nil, nil
	case 3:
		f.stageTimes = append(f.stageTimes, 0)
	case 4:
	default:
		return nil, fmt.Errorf("--stage-times %v: give F,B,W or F,B,W,C (a forward, a backward's input gradient, its weight gradients, a message)", f.stageTimes)
	}
	st := f.stageTimes
	return pp.Simulate(ss, pp.StageTimes{F: st[0], B: st[1], W: st[2], Comm: st[3]})
}

// withSimulation adds "simulated": {"makespan", "bubble_rate"} to the
// schedule's JSON object, when there is a simulation.
func withSimulation(j []byte, sim *pp.Simulation) ([]byte, error) {
	if sim == nil {
		return j, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(j, &obj); err != nil {
		return nil, err
	}
	obj["simulated"] = map[string]float64{"makespan": sim.Makespan, "bubble_rate": sim.BubbleRate}
	return json.Marshal(obj)
}
