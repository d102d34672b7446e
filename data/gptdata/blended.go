package gptdata

import "fmt"

// blendedDataset is the reference's BlendedDataset: sample k is sample
// sampleIdx[k] of dataset datasetIdx[k].
type blendedDataset struct {
	parts       []*gptDataset
	split       int
	description string
	datasetIdx  *array // <i2 [size]
	sampleIdx   *array // <i8 [size]
}

func (d *blendedDataset) Len() int         { return d.datasetIdx.size() }
func (d *blendedDataset) SeqLength() int   { return d.parts[0].SeqLength() }
func (d *blendedDataset) Describe() string { return d.description }

// Sample returns sample i of the blend.
func (d *blendedDataset) Sample(i int) Sample {
	if n := d.Len(); i < 0 || i >= n {
		panic(fmt.Sprintf("gptdata: sample %d of the %s blend, which has %d", i, splitNames[d.split], n))
	}
	return d.parts[d.datasetIdx.i16[i]].Sample(int(d.sampleIdx.i64[i]))
}

// checkBlend verifies blending indices read from a cache: dtypes, shapes,
// and every entry a sample of its dataset.
func checkBlend(di, dsi *array, parts []*gptDataset, size int) error {
	if di.descr != "<i2" || len(di.shape) != 1 || di.shape[0] != size {
		return fmt.Errorf("dataset index: dtype %s shape %v, want <i2 and (%d,)", di.descr, di.shape, size)
	}
	if dsi.descr != "<i8" || len(dsi.shape) != 1 || dsi.shape[0] != size {
		return fmt.Errorf("dataset sample index: dtype %s shape %v, want <i8 and (%d,)", dsi.descr, dsi.shape, size)
	}
	for k := range size {
		d := int(di.i16[k])
		if d < 0 || d >= len(parts) {
			return fmt.Errorf("dataset index: element %d is %d, not one of the %d datasets", k, d, len(parts))
		}
		if s := dsi.i64[k]; s < 0 || s >= int64(parts[d].Len()) {
			return fmt.Errorf("dataset sample index: element %d is %d, not a sample of dataset %d's %d", k, s, d, parts[d].Len())
		}
	}
	return nil
}
