package secret

import "context"

// SetKDFHook makes h call f inside the memory budget before each key
// derivation, so tests can count derivations and hold them in progress.
func SetKDFHook(h *Hasher, f func()) { h.kdfHook = f }

// HoldBudget takes kib KiB of h's memory budget until release is called, so
// tests can fill the budget deterministically.
func HoldBudget(ctx context.Context, h *Hasher, kib int64) (release func(), err error) {
	if err := h.sem.Acquire(ctx, kib); err != nil {
		return nil, err
	}
	return func() { h.sem.Release(kib) }, nil
}
