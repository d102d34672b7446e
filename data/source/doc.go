// Package source opens a run's data from its flags, as Megatron's
// training layer builds its datasets from its arguments: exactly one
// source (Data) among mock data, byte-level text (files, directories or
// the Go standard library's source) and Megatron's indexed datasets
// (--data-path blends split by --split, or one blend per split, read as
// GPTDatasets: package data/gptdata). Data.DataErrors lists the flag
// combinations a run refuses; Open builds the training and validation
// data (Sets) for what the run asks (Need: sequence length, vocabulary,
// seed, the samples of each split, the tokenizer).
//
// The errors of a dataset that cannot be opened say what the user likely
// meant: the dataset gotron preprocess wrote for an --output-prefix, the
// datasets inside a directory, or the preprocess command that tokenizes a
// text file.
package source
