package gptdata

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"weak"
)

// registry shares index arrays between the Builds of one process (the
// ranks): key the cache files' path prefix, value a weak pointer, so
// arrays no dataset holds any more are collected. The mutex also makes
// building and writing the files one rank's job: the others wait and then
// find the arrays here.
var registry struct {
	sync.Mutex
	m map[string]any // weak.Pointer[T]
}

// shared returns the value of key from the registry (hit) or load's,
// which it then registers.
func shared[T any](key string, load func() (*T, error)) (v *T, hit bool, err error) {
	registry.Lock()
	defer registry.Unlock()
	if registry.m == nil {
		registry.m = map[string]any{}
	}
	if w, ok := registry.m[key].(weak.Pointer[T]); ok {
		if v := w.Value(); v != nil {
			return v, true, nil
		}
	}
	v, err = load()
	if err != nil {
		return nil, false, err
	}
	registry.m[key] = weak.Make(v)
	return v, false, nil
}

// cacheSet names the files of one dataset's indices: base + "description.txt"
// and base + each array's name, base = dir/{md5}-{Class}-{split}-.
type cacheSet struct {
	dir, base   string
	description string
	names       []string
}

func (c *cacheSet) path(name string) string { return c.base + name }

// cacheError reports a cache file that cannot be used.
func (c *cacheSet) cacheError(file string, err error) error {
	return fmt.Errorf("gptdata: index cache file %s: %v; delete the files %s* and rerun to rebuild them", file, err, c.base)
}

// read returns the arrays of a complete cache, nil when some file is
// missing (then the caller builds and writes them all), or an error naming
// a file that does not parse or a description that differs.
func (c *cacheSet) read() ([]*array, error) {
	all := append([]string{"description.txt"}, c.names...)
	for _, n := range all {
		if _, err := os.Stat(c.path(n)); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		} else if err != nil {
			return nil, c.cacheError(c.path(n), err)
		}
	}
	desc, err := os.ReadFile(c.path("description.txt"))
	if err != nil {
		return nil, c.cacheError(c.path("description.txt"), err)
	}
	if string(desc) != c.description {
		return nil, c.cacheError(c.path("description.txt"), fmt.Errorf("it describes another dataset (a modified file or an MD5 collision)"))
	}
	out := make([]*array, len(c.names))
	for i, n := range c.names {
		b, err := os.ReadFile(c.path(n))
		if err == nil {
			out[i], err = decodeNpy(b)
		}
		if err != nil {
			return nil, c.cacheError(c.path(n), err)
		}
	}
	return out, nil
}

// write writes the arrays and then the description, each to a temporary
// file renamed into place, so that readers see whole files and a
// description only when the arrays are there.
func (c *cacheSet) write(arrays []*array) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("gptdata: creating the index cache directory: %v (give --data-cache-path a writable directory)", err)
	}
	for i, n := range c.names {
		if err := writeAtomic(c.path(n), encodeNpy(arrays[i])); err != nil {
			return err
		}
	}
	return writeAtomic(c.path("description.txt"), []byte(c.description))
}

// writeAtomic writes b to a temporary file beside path, syncs it and renames
// it to path.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gptdata: writing the index cache: %v (give --data-cache-path a writable directory)", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("gptdata: writing the index cache file %s: %v", path, err)
	}
	return nil
}
