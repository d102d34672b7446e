package ckpt

// Sharded is a rank's share of one whole tensor of a checkpoint, as the
// tensor's owner describes it (Megatron's ShardedTensor): the rank's local
// tensor, of shape Local, is cut from the whole tensor (shape Whole, the
// real one: a vocabulary's padding rows are not saved) as Part says, and
// the rank holds the local tensor's elements [Lo, Lo+len(Data)) in Data,
// row-major — all of them, or a distributed optimizer's flat shard.
//
// Pieces turns a description into what a shard file holds, and
// Reader.Load fills one from a checkpoint of any layout, so that saving
// and loading follow the same description.
type Sharded struct {
	Key          string
	Whole, Local []int
	Part         Partition
	Lo           int
	Data         []float32
}

// regions are the blocks of s's range in its local tensor and where they
// lie in the whole tensor.
func (s Sharded) regions() []Region {
	return Regions(s.Local, s.Part, s.Whole, FlatBoxes(s.Local, s.Lo, s.Lo+len(s.Data)))
}

// Pieces returns the boxes of the whole tensor that s covers, with their
// values (copies), for WriteShard.
func (s Sharded) Pieces() []PieceData {
	var out []PieceData
	for _, r := range s.regions() {
		d := make([]float32, r.Local.Numel())
		CopyBox(d, s.Data, s.Local, s.Lo, r.Local)
		out = append(out, PieceData{Key: s.Key, Box: r.Global, Data: d})
	}
	return out
}

// Load fills s.Data from the checkpoint's tensor s.Key, whatever layout
// saved it, reading only the checksum blocks around the boxes s covers.
func (r *Reader) Load(s Sharded) error {
	for _, reg := range s.regions() {
		buf := make([]float32, reg.Global.Numel())
		if err := r.Fill(s.Key, reg.Global, buf); err != nil {
			return err
		}
		PasteBox(s.Data, s.Local, s.Lo, reg.Local, buf)
	}
	return nil
}
