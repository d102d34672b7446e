//go:build !gotron_poison

package dp

// poisonReleased: see poison_on.go.
const poisonReleased = false
