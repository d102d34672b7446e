// Package safetensors reads and writes tensor files in the safetensors format, the format
// gotron uses to exchange weights, gradients and test fixtures with other implementations
// (the parameter names are Megatron's, see models/gpt).
//
// # Format
//
// A safetensors file is
//
//	[8 bytes]  N, the header length, an unsigned 64-bit little-endian integer
//	[N bytes]  a JSON object: for every tensor
//	           "name": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
//	           and optionally "__metadata__": {"key": "value", ...} (strings only)
//	[rest]     the data section: every tensor's elements, row-major, little-endian
//
// data_offsets are byte offsets relative to the start of the data section (the byte after
// the header), end exclusive, and end-begin = product(shape)·ElemSize(dtype). The format is
// the one of the safetensors project (huggingface/safetensors, docs "Format"); files written
// here load with its Python and Rust readers and the other way round.
//
// # Writing
//
// [WriteFile] writes the tensors sorted by name, packed one after another in that order, with
// the header padded with spaces to a multiple of 8 bytes so that the data section starts
// 8-byte aligned. It is atomic: the bytes go to a temporary file in the same directory, which
// is flushed to stable storage and renamed over the destination, and the directory is then
// synced. A failure at any point leaves the previous file at the path untouched.
//
// # Reading
//
// [ReadFile] and [Read] validate everything before returning: the header length against the
// file size and a 100 MB cap, the JSON, every dtype, every shape against its data_offsets
// (element count and byte length computed with overflow checks, so that no header makes the
// reader allocate more than the file holds), that no two tensors overlap and that the data
// section holds every tensor. Each error names the file, says what is wrong with the
// numbers involved and how to fix it. Holes between tensors and trailing bytes after the
// last one are accepted. [File.Check] compares a file with the tensor names and shapes a
// model expects and reports every difference at once.
package safetensors
