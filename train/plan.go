package train

import "github.com/gotron/gotron/plan"

// PlanRun is what gotron plan reads of a run of a on world devices: a
// normalised as a run on world ranks normalises it, and checked by
// Validate, so that the planner predicts only runs gotron would start.
// The plan reads no data, and is of one iteration: it checks the
// settings as a --mock-data run, of one iteration unless the length is
// given.
func PlanRun(a Args, world int) (plan.Run, error) {
	if a.TrainIters == 0 && a.TrainSamples == 0 {
		a.TrainIters = 1
	}
	a.MockData, a.DataPath, a.TrainDataPath, a.ValidDataPath, a.TestDataPath, a.TextDataPath, a.GoStdlibCorpus = true, nil, nil, nil, nil, nil, false
	a = normalise(a, world)
	if err := a.Validate(world); err != nil {
		return plan.Run{}, err
	}
	return a.memoryRun(), nil
}

// WithLayout returns a laid out as l: its model by plan.Layout.Apply, its
// micro-batch and its pipeline schedule (l's, "" being 1F1B, or
// interleaved with virtual stages).
func (a Args) WithLayout(l plan.Layout) Args {
	a.Model, a.MicroBatchSize, a.PipelineSchedule = l.Apply(a.Model), l.MicroBatch, l.Schedule
	return a
}
