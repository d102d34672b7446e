package dp

// matchesFP32Pattern reports whether a parameter named name gets a float32
// local gradient under param_name_patterns_for_fp32_local_accumulation: a
// pattern "all" matches every name, any other is matched as Python's
// fnmatch does (fnmatchPattern).
func matchesFP32Pattern(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == "all" || fnmatchPattern(p, name) {
			return true
		}
	}
	return false
}

// fnmatchPattern reports whether name matches the shell-style pattern the
// way Python's fnmatch.fnmatchcase does (and fnmatch.fnmatch on POSIX,
// which is case-sensitive): '*' matches any run of characters, '.' and '/'
// included; '?' any one character; "[seq]" one character of seq, which
// may hold ranges "a-z" (a reversed range matches nothing) and starts with
// ']' to include it; "[!seq]" one character not in seq; a '[' without its
// ']' is a literal '['. Every other character matches itself.
func fnmatchPattern(pattern, name string) bool {
	p, s := []rune(pattern), []rune(name)
	pi, si := 0, 0
	star, resume := -1, 0 // the last '*' seen and where its match would end next
	for si < len(s) {
		if pi < len(p) && p[pi] == '*' {
			star, resume = pi, si
			pi++
			continue
		}
		if pi < len(p) {
			if next, ok := matchOne(p, pi, s[si]); ok {
				pi, si = next, si+1
				continue
			}
		}
		if star < 0 {
			return false
		}
		resume++
		pi, si = star+1, resume
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchOne matches c against the pattern item at p[i] (not '*'): it
// returns the index after the item and whether c matches it.
func matchOne(p []rune, i int, c rune) (int, bool) {
	switch p[i] {
	case '?':
		return i + 1, true
	case '[':
		j := i + 1
		if j < len(p) && p[j] == '!' {
			j++
		}
		if j < len(p) && p[j] == ']' {
			j++
		}
		for j < len(p) && p[j] != ']' {
			j++
		}
		if j >= len(p) {
			return i + 1, c == '['
		}
		set := p[i+1 : j]
		neg := set[0] == '!'
		if neg {
			set = set[1:]
		}
		in := false
		for k := 0; k < len(set); {
			if k+2 < len(set) && set[k+1] == '-' {
				in = in || (set[k] <= c && c <= set[k+2])
				k += 3
				continue
			}
			in = in || set[k] == c
			k++
		}
		return j + 1, in != neg
	}
	return i + 1, p[i] == c
}
