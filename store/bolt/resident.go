package bolt

import (
	"time"

	"github.com/authsrv/authsrv/store"
)

// The store's file is mapped into the process. Every page a read touches
// stays in the process's page tables, so a walk over a large file, or
// lookups spread over a million tokens, make the resident set as large as
// the file even though the pages belong to the operating system's page
// cache. It grows fast: the kernel maps the cached pages around each page
// a read faults in (fault-around, 64 KiB), whatever the map's MADV_RANDOM
// advice, so a random key lookup in a file of 2 GB maps 60-160 KiB
// (measured on Linux 6.18), and thousands of lookups a second map hundreds
// of MiB within a second. With Options.ResidentLimit set, a goroutine reads
// the process's resident file-backed memory (/proc/self/statm, cheap) every
// ResidentInterval and, when it has grown past the limit since Open,
// unmaps the store's pages from the process (madvise MADV_DONTNEED on the read-only
// shared mapping): the data stays in the page cache, the next access maps
// it again with a minor fault, and the process's resident set stays
// bounded. Linux only; elsewhere the limit is accepted and does nothing.

// DefaultResidentInterval is how often the resident file pages are counted
// when Options.ResidentInterval is 0.
const DefaultResidentInterval = 50 * time.Millisecond

// ResidentStats is one count of the store file's pages resident in the
// process.
type ResidentStats struct {
	// Supported is false where the count cannot be taken (not Linux).
	Supported bool
	// FileBytes is the size of the data the count covered.
	FileBytes int64
	// ResidentBytes is how much of it was mapped in the process.
	ResidentBytes int64
}

// startResidentTrim starts the goroutine that keeps the resident file pages
// under limit.
func (db *DB) startResidentTrim(limit int64, every time.Duration) {
	if limit <= 0 || !residentSupported {
		return
	}
	statm, err := openStatm()
	if err != nil {
		return
	}
	base, err := statm.shared()
	if err != nil {
		statm.close()
		return
	}
	db.life.Go(func(closing <-chan struct{}) {
		defer statm.close()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-closing:
				return
			case <-t.C:
			}
			// The file-backed memory the process had at Open (its binary,
			// mostly) is not the store's; what grew past it is.
			if n, err := statm.shared(); err != nil || n-base <= limit {
				continue
			}
			_ = db.trim()
		}
	})
}

// Resident counts the store file's pages that are mapped in the process.
func (db *DB) Resident() (ResidentStats, error) {
	return db.residentOp(false)
}

// TrimResident unmaps the store file's pages from the process (they stay in
// the operating system's page cache) and returns the count taken before.
// Reads and writes go on meanwhile; a commit that has to grow the map waits
// until it is done.
func (db *DB) TrimResident() (ResidentStats, error) {
	return db.residentOp(true)
}

// DropResident unmaps the store file's pages from the process, as
// TrimResident does, without counting them first (a count reads
// /proc/self/smaps).
func (db *DB) DropResident() error {
	if !residentSupported {
		return nil
	}
	return db.trim()
}

// trim drops the resident pages without counting them first.
func (db *DB) trim() error {
	return db.inMapLock(func(data uintptr, size int64) error { return dropResident(data, size) })
}

// residentOp counts, and with trim drops, the resident pages.
func (db *DB) residentOp(trim bool) (ResidentStats, error) {
	if !residentSupported {
		return ResidentStats{}, nil
	}
	var st ResidentStats
	err := db.inMapLock(func(data uintptr, size int64) error {
		st = ResidentStats{Supported: true, FileBytes: size}
		n, err := residentBytes(data, size)
		if err != nil {
			return err
		}
		st.ResidentBytes = n
		if trim {
			return dropResident(data, size)
		}
		return nil
	})
	return st, err
}

// inMapLock runs fn with the start of bbolt's map and the data size inside
// a read transaction: bbolt holds its map lock for reading while one is
// open, so the map cannot move or shrink under fn's system calls.
func (db *DB) inMapLock(fn func(data uintptr, size int64) error) error {
	if !db.life.Enter() {
		return store.ErrClosed
	}
	defer db.life.Done()
	btx, err := db.bdb.Begin(false)
	if err != nil {
		return mapErr(err)
	}
	defer func() { _ = btx.Rollback() }()
	return fn(db.bdb.Info().Data, btx.Size())
}
