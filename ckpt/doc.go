// Package ckpt saves and loads gotron's training checkpoints.
//
// A checkpoint directory holds one sub-directory per saved iteration and
// Megatron's tracker file:
//
//	DIR/latest_checkpointed_iteration.txt   "20"
//	DIR/iter_0000020/metadata.json          the manifest (CRC32C-protected)
//	DIR/iter_0000020/shard_00000.bin        rank 0's pieces, float32
//	DIR/iter_0000020/shard_00003.bin        rank 3's pieces, …
//
// The checkpoint is distributed: every rank writes, in parallel, the
// pieces of the tensors it owns (its tensor- and pipeline-parallel
// partitions, its distributed-optimizer shard; replicated data once). A
// piece is a Box of a whole tensor, keyed by the tensor's global name
// ("model/decoder.layers.0.mlp.linear_fc1.weight",
// "optimizer/exp_avg/…", "optimizer/exp_avg_sq/…"), so a checkpoint does
// not depend on the layout that wrote it: Regions maps a rank's local
// tensor (or a flat range of it, FlatBoxes) to boxes of the whole tensor,
// and Reader.Fill reads any box back from the pieces that intersect it.
// An owner describes its share of a whole tensor as a Sharded (key, whole
// and local shapes, partition, flat range, values): Sharded.Pieces is what
// its shard holds, and Reader.Load fills the same description back from
// a checkpoint of any layout.
//
// The manifest lists the run's arguments and layout, the training state
// (iteration, consumed samples, optimizer steps, loss scaler, every
// rank's generator states), every tensor's whole shape, and every shard's
// pieces with a CRC32C per BlockSize bytes. A load reads only the blocks
// around the elements it needs and verifies each: a flipped bit is
// reported with the shard, the tensor and the piece (DamageError). The
// manifest carries its own checksum; Open also refuses pieces that overlap
// or leave part of a tensor unsaved.
//
// Saving is atomic: BeginSave creates a temporary directory, the ranks
// write their shards into it (WriteShard), and Commit writes the manifest,
// syncs, renames the directory into place, and only then replaces the
// tracker (write, sync, rename). A save that fails at any point leaves the
// previous checkpoint and tracker untouched; temporaries a killed save
// left are removed by the next save.
//
// Saver runs that protocol from every rank of a world at once: Begin
// (rank 0 prepares the temporary directory, every rank learns it), Write
// (each rank its shard, in the background for an async save), Finish
// (the shards' indexes gathered, rank 0 commits, every rank learns the
// outcome: a failure anywhere is reported everywhere, naming the
// checkpoint that stays intact). The trainer gives it the manifest and its
// pieces; the protocol is the Saver's alone.
//
// A run holds LockDir's lock on the directory it saves into: the file
// DIR/gotron.lock names the holder (pid, host, start time) under an
// exclusive flock. A second run is refused with a *LockedError naming the
// first, instead of the two writing iterations over each other (each
// save's clean-up removes the other's temporaries); a lock whose flock is
// free belonged to a run that is gone and is taken over, at once on the
// same machine, after StaleAfter without a heartbeat from another one.
//
// Save and Load read and write the whole-tensor form (model.safetensors,
// optimizer.safetensors and state.json, Megatron's parameter names), which
// `gotron ckpt convert` produces and reads.
package ckpt
