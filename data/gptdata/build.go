package gptdata

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
)

// surplus is the reference's mid_level_dataset_surplus: a blend builds
// 0.5 % more samples of each dataset than it plans to use.
const surplus = 0.005

// Build builds the train, valid and test datasets of --data-path blend with
// --split cfg.Split for numSamples samples each (see [NumSamples]), opening
// each prefix once with open, as the reference's
// BlendedMegatronDatasetBuilder does:
//
//   - a single prefix without a weight gives GPTDatasets;
//   - weighted prefixes (even a single one) give blends of GPTDatasets of
//     ceil(ceil(n·w)·1.005) samples, with sum ceil(n·w) samples;
//   - prefixes without weights give blends of one epoch of each dataset,
//     weighed by their lengths, with min(n, Σ lengths) samples.
//
// A split gets nil when it asks for 0 samples, when --split gives it no
// share, or, for a single prefix, when its share holds no documents (the
// reference would loop forever). Every other dataset has at least the
// samples asked for, or Build fails saying so (only a blend of prefixes
// without weights can fall short).
func Build(cfg Config, blend Blend, numSamples [3]int, open func(prefix string) (Source, error)) ([3]Dataset, error) {
	if cfg.Split == "" {
		cfg.Split = defaultSplit
	}
	v, err := ParseSplit(cfg.Split)
	if err != nil {
		return [3]Dataset{}, err
	}
	m := splitBookends(v)
	b := &builder{cfg: &cfg, splitStr: &cfg.Split, bookends: &m, open: open}
	if err := b.check(numSamples, blend); err != nil {
		return [3]Dataset{}, err
	}
	var out [3]Dataset
	for i := range 3 {
		if m[i] == nil || numSamples[i] == 0 {
			continue
		}
		single := len(blend.Prefixes) == 1 && blend.Weights == nil
		if out[i], err = b.split(blend, *m[i], numSamples[i], i, single); err != nil {
			return [3]Dataset{}, err
		}
	}
	return out, checkLengths(out, numSamples)
}

// BuildPerSplit builds the datasets of --train-data-path, --valid-data-path
// and --test-data-path: blends[i] (no prefixes: no data) gives split i
// whole. One prefix gives a GPTDataset (with or without a weight), more a
// blend as in [Build]. cfg.Split must be empty. A split gets nil when it
// asks for 0 samples or has no prefixes.
func BuildPerSplit(cfg Config, blends [3]Blend, numSamples [3]int, open func(prefix string) (Source, error)) ([3]Dataset, error) {
	if cfg.Split != "" {
		return [3]Dataset{}, fmt.Errorf("gptdata: --split %q with per-split data paths: --split applies to --data-path only", cfg.Split)
	}
	b := &builder{cfg: &cfg, open: open}
	var out [3]Dataset
	for i := range 3 {
		if len(blends[i].Prefixes) == 0 || numSamples[i] == 0 {
			continue
		}
		if err := b.check(numSamples, blends[i]); err != nil {
			return [3]Dataset{}, fmt.Errorf("--%s-data-path: %w", splitNames[i], err)
		}
		var err error
		if out[i], err = b.split(blends[i], bookend{0, 1}, numSamples[i], i, len(blends[i].Prefixes) == 1); err != nil {
			return [3]Dataset{}, err
		}
		if out[i] == nil {
			return [3]Dataset{}, fmt.Errorf("gptdata: --%s-data-path %s holds no documents", splitNames[i], blends[i].Prefixes[0])
		}
	}
	return out, checkLengths(out, numSamples)
}

// builder builds the datasets of one Build call.
type builder struct {
	cfg      *Config
	splitStr *string      // nil with per-split paths (the description's null)
	bookends *[3]*bookend // likewise
	open     func(string) (Source, error)
	sources  map[string]Source
}

// errNoDocuments marks a split whose share of a dataset holds no documents.
var errNoDocuments = errors.New("no documents")

// blendMemberFix adds the ways on to a blend member's split i that holds
// no documents (each member's share is taken by --split from its own
// documents, and a blend cannot draw from an empty one).
func blendMemberFix(err error, i int) error {
	if !errors.Is(err, errNoDocuments) {
		return err
	}
	fix := "give the split a larger share with --split, or leave the dataset out of the blend"
	switch i {
	case 1:
		fix += ", or pass --valid-data-path with a blend of its own, or --eval-iters 0 for no validation"
	case 2:
		fix += ", or drop the test split's share from --split"
	}
	return fmt.Errorf("%w: each dataset of a blend gives every split its own share of its documents: %s", err, fix)
}

// check validates the options, the counts and a blend.
func (b *builder) check(numSamples [3]int, bl Blend) error {
	if b.cfg.SeqLength < 2 {
		return fmt.Errorf("gptdata: --seq-length %d: the reference's sample index needs at least 2", b.cfg.SeqLength)
	}
	if b.cfg.Seed > math.MaxUint32 {
		return fmt.Errorf("gptdata: --seed %d: numpy's RandomState takes seeds in [0, 2^32−1]", b.cfg.Seed)
	}
	for i, n := range numSamples {
		if n < 0 {
			return fmt.Errorf("gptdata: %d %s samples asked for", n, splitNames[i])
		}
	}
	if len(bl.Prefixes) == 0 {
		return fmt.Errorf("gptdata: no dataset prefix")
	}
	if len(bl.Prefixes) >= math.MaxInt16 {
		return fmt.Errorf("gptdata: a blend of %d datasets, the reference's limit is 32766", len(bl.Prefixes))
	}
	if bl.Weights != nil && len(bl.Weights) != len(bl.Prefixes) {
		return fmt.Errorf("gptdata: %d weights for %d prefixes", len(bl.Weights), len(bl.Prefixes))
	}
	for i, w := range bl.Weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return fmt.Errorf("gptdata: weight %v of %s is not a positive finite number", w, bl.Prefixes[i])
		}
	}
	return nil
}

// source opens prefix once per Build.
func (b *builder) source(prefix string) (Source, []int32, error) {
	s, ok := b.sources[prefix]
	if !ok {
		var err error
		if s, err = b.open(prefix); err != nil {
			return nil, nil, err
		}
		if b.sources == nil {
			b.sources = map[string]Source{}
		}
		b.sources[prefix] = s
	}
	sizes := s.SequenceLengths()
	if len(sizes) == 0 {
		return nil, nil, fmt.Errorf("gptdata: dataset %s holds no sequences", prefix)
	}
	return s, sizes, nil
}

// split builds split i from bl for n samples: a GPTDataset (nil when the
// split holds no documents) when single, else a blend.
func (b *builder) split(bl Blend, be bookend, n, i int, single bool) (Dataset, error) {
	if single {
		d, err := b.gpt(bl.Prefixes[0], be, n, i)
		if errors.Is(err, errNoDocuments) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	parts := make([]*gptDataset, len(bl.Prefixes))
	var weights []float64
	size := 0
	if bl.Weights != nil {
		w := normalize(bl.Weights)
		for k, p := range bl.Prefixes {
			target := math.Ceil(float64(n) * w[k])
			var err error
			if parts[k], err = b.gpt(p, be, int(math.Ceil(target*(1+surplus))), i); err != nil {
				return nil, blendMemberFix(err, i)
			}
			size += int(target)
		}
		weights = normalize(w)
	} else {
		lens := make([]float64, len(bl.Prefixes))
		total := 0
		for k, p := range bl.Prefixes {
			var err error
			if parts[k], err = b.gpt(p, be, -1, i); err != nil {
				return nil, blendMemberFix(err, i)
			}
			if parts[k].Len() == 0 {
				return nil, fmt.Errorf("gptdata: the %s split of %s holds no whole sample, so it has no weight in the blend", splitNames[i], p)
			}
			lens[k] = float64(parts[k].Len())
			total += parts[k].Len()
		}
		size = min(n, total)
		weights = normalize(lens)
	}
	return b.blend(parts, weights, size, i)
}

// gpt builds the GPTDataset of split i of prefix over bookend be for
// numSamples samples (< 0: one epoch).
func (b *builder) gpt(prefix string, be bookend, numSamples, split int) (*gptDataset, error) {
	src, sizes, err := b.source(prefix)
	if err != nil {
		return nil, err
	}
	beg, end := be.documents(len(sizes))
	if beg >= end {
		return nil, fmt.Errorf("gptdata: the %s split of %s (documents [%d, %d) of %d): %w", splitNames[split], prefix, beg, end, len(sizes), errNoDocuments)
	}
	seq := b.cfg.SeqLength
	plan, err := planGPT(sizes, beg, end, numSamples, seq)
	if err != nil {
		return nil, fmt.Errorf("gptdata: the %s split of %s: %v", splitNames[split], prefix, err)
	}
	d := &gptDataset{src: src, sizes: sizes, cfg: b.cfg, split: split}
	d.ids = gptIdentifiers(src.Prefix(), numSamples, split, b.cfg, b.splitStr, b.bookends)
	var hash string
	d.description, hash = describe(d.ids)
	dir := b.cfg.CachePath
	if dir == "" {
		dir = filepath.Join(src.Prefix(), "cache", "GPTDataset_indices")
	}
	c := &cacheSet{dir: dir, base: filepath.Join(dir, hash+"-GPTDataset-"+splitNames[split]+"-"), description: d.description,
		names: []string{"document_index.npy", "sample_index.npy", "shuffle_index.npy"}}
	// Indices from the files or from another rank's Build are checked
	// against this dataset (a changed dataset, a damaged file).
	idx, hit, err := shared(c.base, func() (*gptIndex, error) {
		a, err := c.read()
		if err != nil {
			return nil, err
		}
		if a == nil {
			x := buildGPTIndex(sizes, plan, seq, uint32(b.cfg.Seed))
			return x, c.write([]*array{x.doc, x.sample, x.shuffle})
		}
		x := &gptIndex{doc: a[0], sample: a[1], shuffle: a[2]}
		if err := x.check(sizes, seq); err != nil {
			return nil, c.cacheError(c.base+"*.npy", err)
		}
		return x, nil
	})
	if err != nil {
		return nil, err
	}
	if hit {
		if err := idx.check(sizes, seq); err != nil {
			return nil, fmt.Errorf("gptdata: the indices %s* do not fit dataset %s (%v): the data changed; delete them and rerun to rebuild them", c.base, prefix, err)
		}
	}
	d.idx = idx
	return d, nil
}

// blendIndex holds a blend's two index arrays.
type blendIndex struct{ dataset, sample *array }

// blend builds the blend of parts with normalised weights and size samples;
// its indices are cached only under cfg.CachePath (as the reference does).
func (b *builder) blend(parts []*gptDataset, weights []float64, size, split int) (*blendedDataset, error) {
	ids := make([]pyDict, len(parts))
	for i, p := range parts {
		ids[i] = p.ids
	}
	d := &blendedDataset{parts: parts, split: split}
	var hash string
	d.description, hash = describe(blendedIdentifiers(ids, split, weights, size))
	build := func() (*blendIndex, error) {
		di, dsi := blendingIndices(weights, size)
		counts := make([]int, len(parts))
		for _, k := range di.i16 {
			counts[k]++
		}
		for k, c := range counts {
			if c > parts[k].Len() {
				return nil, fmt.Errorf("gptdata: the %s blend takes %d samples from %s, which has %d: the reference's mid_level_dataset_surplus (0.005) is too small for it",
					splitNames[split], c, parts[k].src.Prefix(), parts[k].Len())
			}
		}
		return &blendIndex{di, dsi}, nil
	}
	if b.cfg.CachePath == "" {
		x, err := build()
		if err != nil {
			return nil, err
		}
		d.datasetIdx, d.sampleIdx = x.dataset, x.sample
		return d, nil
	}
	c := &cacheSet{dir: b.cfg.CachePath, base: filepath.Join(b.cfg.CachePath, hash+"-BlendedDataset-"+splitNames[split]+"-"),
		description: d.description, names: []string{"dataset_index.npy", "dataset_sample_index.npy"}}
	x, hit, err := shared(c.base, func() (*blendIndex, error) {
		a, err := c.read()
		if err != nil {
			return nil, err
		}
		if a == nil {
			x, err := build()
			if err != nil {
				return nil, err
			}
			return x, c.write([]*array{x.dataset, x.sample})
		}
		if err := checkBlend(a[0], a[1], parts, size); err != nil {
			return nil, c.cacheError(c.base+"*.npy", err)
		}
		return &blendIndex{a[0], a[1]}, nil
	})
	if err != nil {
		return nil, err
	}
	if hit {
		if err := checkBlend(x.dataset, x.sample, parts, size); err != nil {
			return nil, fmt.Errorf("gptdata: the indices %s* do not fit the blend (%v): delete them and rerun to rebuild them", c.base, err)
		}
	}
	d.datasetIdx, d.sampleIdx = x.dataset, x.sample
	return d, nil
}

// checkLengths fails when a dataset has fewer samples than asked for.
func checkLengths(ds [3]Dataset, numSamples [3]int) error {
	for i, d := range ds {
		if d != nil && d.Len() < numSamples[i] {
			return fmt.Errorf("gptdata: the %s split has %d samples (one epoch of each dataset of the blend), the run needs %d: give the blend weights (then datasets repeat) or more data",
				splitNames[i], d.Len(), numSamples[i])
		}
	}
	return nil
}
