package comm

import "time"

// DefaultTimeout is the bound on every blocking call when Options.Timeout is
// zero: Megatron's --distributed-timeout-minutes default of 10.
const DefaultTimeout = 10 * time.Minute

// Options configures a backend's world.
type Options struct {
	// Timeout bounds every blocking call, measured from the call (or, for an
	// async operation, from its issue): past it the call returns a
	// *TimeoutError whose Cause is ErrTimeout. Zero means DefaultTimeout; a
	// negative value means no bound other than the call's context. It is
	// Megatron's --distributed-timeout-minutes (torch's init_process_group
	// timeout).
	Timeout time.Duration
}

// EffectiveTimeout returns the bound a backend applies: Timeout, or
// DefaultTimeout when Timeout is zero, or 0 (no bound) when it is negative.
func (o Options) EffectiveTimeout() time.Duration {
	switch {
	case o.Timeout == 0:
		return DefaultTimeout
	case o.Timeout < 0:
		return 0
	}
	return o.Timeout
}
