// Package preprocess turns text into indexed datasets: the engine of `gotron preprocess`,
// the counterpart of Megatron's tools/preprocess_data.py.
//
// # Input
//
// Each input path is a file or a directory walked recursively in lexical order (hidden
// directories skipped; with Options.Extensions only files with those extensions). A file
// whose name ends in .jsonl, .json or .ndjson holds JSON lines: one document per line, a
// JSON object whose Options.JSONKeys each hold a string (one sequence) or a list of
// strings (one sequence each, as the reference's pre-split sentences). Blank lines are
// not documents. Any other file is one plain-text document, its whole content under each
// key (only with the single default key "text"); a file containing a NUL byte is binary
// and skipped (counted). A line that is not a JSON object, lacks a key or holds another
// type is an error naming the file and line, unless Options.SkipBadLines (then it is
// skipped and counted).
//
// # Output
//
// For each key an indexed dataset PREFIX_KEY_document.{bin,idx} (package indexed), in the
// dtype the tokenizer's vocabulary needs (uint16 below 65,500 ids, else int32). A
// document's tokens are its sequences' tokens in order; empty sequences are dropped, and
// with Options.AppendEOD the tokenizer's end-of-document id is appended to the last
// sequence of a document that has any tokens (an empty document stays empty, as in the
// reference). The files appear atomically when everything succeeded: an error or a
// cancelled context leaves no file under the output names.
//
// # Parallelism
//
// The input is read in chunks of whole lines (about 1 MiB) in one goroutine, tokenized by
// Options.Workers goroutines, and written in input order by one writer, so the output
// does not depend on the number of workers.
package preprocess
