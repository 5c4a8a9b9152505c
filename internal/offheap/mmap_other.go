//go:build !unix

package offheap

// Without anonymous mappings every allocation comes from the heap.
func mapAnon(int) []byte { return nil }

func unmap([]byte) {}
