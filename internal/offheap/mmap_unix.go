//go:build unix

package offheap

import "golang.org/x/sys/unix"

// mapAnon maps size bytes of private anonymous memory (zeroed, not
// scanned by the collector); nil when the mapping fails.
func mapAnon(size int) []byte {
	if disabled {
		return nil
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	adviseHuge(mem)
	return mem
}

func unmap(mem []byte) { _ = unix.Munmap(mem) }
