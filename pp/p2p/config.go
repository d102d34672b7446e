package p2p

import "github.com/gotron/gotron/config"

// Config holds the ModelParallelConfig settings the communicator reads
// (docs/SEMANTICS.md § Pipeline communication). Build it from a whole
// configuration with ConfigFrom, or fill it in directly in tests.
type Config struct {
	// PipelineDType is the wire type of every tensor message: Float32,
	// BFloat16 or Float16 (pipeline_dtype). Required when the pipeline has
	// more than one stage.
	PipelineDType config.DType

	// VariableSeqLengths exchanges the tensor shapes before every exchange
	// (variable_seq_lengths): receivers then need no shape from the caller.
	VariableSeqLengths bool

	// MTPStandalone forces the shape exchange too (mtp_standalone: the
	// multi-token-prediction block on its own stage sends tensors of
	// another shape).
	MTPStandalone bool

	// BatchP2PComm issues the ops of an exchange as one comm BatchP2P
	// (batch_p2p_comm) instead of one async op each in even/odd order.
	// Batched exchanges always wait, so it excludes OverlapP2PComm.
	BatchP2PComm bool

	// BatchP2PSync is the reference's device synchronisation after a
	// batched exchange (batch_p2p_sync). Accepted and a no-op: a comm Work
	// that has completed has finished with its buffers (DECISIONS.md,
	// perf-only knobs).
	BatchP2PSync bool

	// OverlapP2PComm says the schedule will ask for handles instead of
	// waiting (overlap_p2p_comm). The communicator only checks it against
	// BatchP2PComm; the schedule passes overlap per call.
	OverlapP2PComm bool

	// Timers, when not nil, times each named call under the reference's
	// timer names ("forward-recv", "backward-send-forward-recv", …) at log
	// level 2.
	Timers config.TimersFunc
}

// ConfigFrom picks the communicator's settings out of a model-parallel
// configuration (which should have been validated).
func ConfigFrom(mp *config.ModelParallelConfig) Config {
	return Config{
		PipelineDType:      mp.PipelineDType,
		VariableSeqLengths: mp.VariableSeqLengths,
		MTPStandalone:      mp.MTPStandalone,
		BatchP2PComm:       mp.BatchP2PComm,
		BatchP2PSync:       mp.BatchP2PSync,
		OverlapP2PComm:     mp.OverlapP2PComm,
		Timers:             mp.Timers,
	}
}

// exchangesShapes reports whether every exchange starts with the shapes.
func (c Config) exchangesShapes() bool { return c.VariableSeqLengths || c.MTPStandalone }
