package passwd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/internal/offheap"
)

// DefaultMaxFileSize is the largest passwd file a store loads unless its
// MaxFileSize parameter says otherwise: about 2.5 million users of 100
// bytes. The store holds the file's text plus about 45 bytes per user.
const DefaultMaxFileSize = 256 << 20

// maxMaxFileSize is the highest MaxFileSize: offsets into the text are
// 32 bits.
const maxMaxFileSize = 1<<32 - 1

// tooLargeError: the file is over the store's limit.
type tooLargeError struct {
	size, limit int64
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("passwd: the file has %d bytes, more than the limit of %d (%s)", e.size, e.limit, ParamMaxFileSize)
}

// describe turns a load error on path into the short text shown by Test
// and by configuration errors (no OS error text, nothing read from the
// file). The refusals name the rule that refused.
func describe(err error, path string) string {
	var tl *tooLargeError
	switch {
	case errors.Is(err, fileroot.ErrDataDir):
		return fmt.Sprintf("The file %s is in the server's data directory, whose files are never readable as a user list.", path)
	case errors.As(err, &tl):
		return fmt.Sprintf("The file has %d bytes, more than the limit of %d bytes (parameter %s).", tl.size, tl.limit, ParamMaxFileSize)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "The test was cancelled or timed out."
	}
	return fileroot.Describe(err, path)
}

// policy decides which files may be opened.
type policy struct {
	files fileroot.Confinement
}

// lexical checks the configured path without touching the file system.
func (p policy) lexical(path string) error { return p.files.CheckName(path) }

// validate is the save-time check: the lexical rules, and when the file
// exists, the rules on what it resolves to. A missing or unreadable file
// is accepted (it may be created later; Test reports it).
func (p policy) validate(path string) error {
	if err := p.files.Check(path); err != nil {
		return configErr(describe(err, path))
	}
	return nil
}

// open opens the file for reading under the confinement's rules, which
// run on every load, not only when the configuration is saved.
func (p policy) open(path string) (*os.File, fs.FileInfo, error) {
	f, err := p.files.Open(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// fileStat identifies one version of the file.
type fileStat struct {
	fi    fs.FileInfo
	size  int64
	mtime time.Time
}

// same reports whether fi is the same file (device and inode), size and
// modification time.
func (a fileStat) same(b fileStat) bool {
	return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) && a.size == b.size && a.mtime.Equal(b.mtime)
}

// read opens and parses the file. unchanged is asked first with the
// file's identity; when it says true, read returns (nil, nil). A file over
// limit is refused before it is read (and, should it grow while being
// read, after limit+1 bytes): never cut short.
func (p policy) read(ctx context.Context, path string, limit int64, unchanged func(fileStat) bool, report func(done, total int64)) (*snapshot, error) {
	f, fi, err := p.open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := fileStat{fi: fi, size: fi.Size(), mtime: fi.ModTime()}
	if unchanged(st) {
		return nil, nil
	}
	if fi.Size() > limit {
		return nil, &tooLargeError{fi.Size(), limit}
	}
	// The text goes straight into the snapshot's memory (outside the heap
	// when large); a file that grew since its stat continues on the heap.
	mem := offheap.New()
	buf, err := readAll(f, mem, offheap.Bytes(mem, 0, int(fi.Size())+512), limit)
	if err != nil {
		mem.Free()
		return nil, err
	}
	data := offheap.String(buf)
	var rep progress
	if report != nil {
		report(0, int64(len(data)))
		rep = func(done int) { report(int64(done), int64(len(data))) }
	}
	snap, err := parseIn(ctx, mem, data, rep)
	if err != nil {
		mem.Free()
		return nil, err
	}
	snap.stat = st
	return snap, nil
}

// readAll appends r's bytes to buf (growing it in mem); a text over
// limit bytes is refused (after limit+1 bytes).
func readAll(r io.Reader, mem *offheap.Arena, buf []byte, limit int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = offheap.Grow(mem, buf, 64<<10)
		}
		end := cap(buf)
		if int64(end) > limit {
			end = int(limit) + 1
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &tooLargeError{int64(len(buf)), limit}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// size returns the size of the file under the confinement's rules.
func (p policy) size(path string) (int64, error) {
	f, fi, err := p.open(path)
	if err != nil {
		return 0, err
	}
	_ = f.Close()
	return fi.Size(), nil
}
