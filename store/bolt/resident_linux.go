//go:build linux

package bolt

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const residentSupported = true

// residentBytes returns how much of bbolt's map, which starts at addr, is
// mapped in the process: the Rss of that mapping in /proc/self/smaps.
// (mincore(2) would not do: it reports the page cache, not the process.)
func residentBytes(addr uintptr, _ int64) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := strconv.FormatUint(uint64(addr), 16) + "-"
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !found {
			found = strings.HasPrefix(line, start)
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("smaps: %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("smaps: no mapping at %#x", addr)
}

// dropResident unmaps the pages of [addr, addr+size) from the process. The
// map is read-only and shared, so nothing is lost: the pages stay in the
// page cache and the next access maps them again.
func dropResident(addr uintptr, size int64) error {
	if size <= 0 {
		return nil
	}
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, uintptr(size), unix.MADV_DONTNEED)
	if errno != 0 {
		return fmt.Errorf("madvise: %w", errno)
	}
	return nil
}
