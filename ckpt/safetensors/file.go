package safetensors

import "sort"

// metadataKey is the reserved header key of the free-form string metadata.
const metadataKey = "__metadata__"

// File is the content of a safetensors file.
type File struct {
	// Name is the file's path (or the name given to [Read]); errors about the file start
	// with it.
	Name string
	// Tensors holds every tensor of the file, sorted by name.
	Tensors []Tensor
	// Metadata is the header's "__metadata__" object; nil when the file has none.
	Metadata map[string]string
}

// Get returns the tensor called name and whether the file has it.
func (f *File) Get(name string) (Tensor, bool) {
	i := sort.Search(len(f.Tensors), func(i int) bool { return f.Tensors[i].Name >= name })
	if i < len(f.Tensors) && f.Tensors[i].Name == name {
		return f.Tensors[i], true
	}
	return Tensor{}, false
}

// Names returns the names of the file's tensors, sorted.
func (f *File) Names() []string {
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	return names
}
