package data

// File is a regular file found by [ListFiles].
type File struct {
	// Path is where the file lies on disk.
	Path string
	// Name identifies it as a corpus document name does (see [Document]).
	Name string
	// Size is its length when listed.
	Size int64
}

// ListFiles lists the files under paths without reading them, as [LoadTextCorpus] finds
// them: each path is a file (listed whatever its extension) or a directory walked
// recursively in lexical order, keeping the regular files whose extension is in exts
// (empty: every file) and skipping hidden directories and those named in skipDirs.
// Errors name the paths by label, the flag they come from (e.g. "--input"): a path that
// does not exist, or one that is neither a regular file nor a directory.
func ListFiles(label string, paths, exts, skipDirs []string) ([]File, error) {
	w := walker{label: label, exts: normaliseExts(exts), skipDirs: skipDirs}
	for _, p := range paths {
		if err := w.load(p); err != nil {
			return nil, err
		}
	}
	out := make([]File, len(w.files))
	for i, f := range w.files {
		out[i] = File{Path: f.path, Name: f.name, Size: f.size}
	}
	return out, nil
}
