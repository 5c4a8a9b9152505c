package passwd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/authsrv/authsrv/fileroot"
)

// maxFileSize caps what a load reads: a million users fit comfortably.
const maxFileSize = 64 << 20

// errTooLarge: the file is over maxFileSize.
var errTooLarge = errors.New("passwd: the file is larger than 64 MiB")

// describe turns a load error on path into the short text shown by Test
// and by configuration errors (no OS error text, nothing read from the
// file). The refusals name the rule that refused.
func describe(err error, path string) string {
	switch {
	case errors.Is(err, fileroot.ErrDataDir):
		return fmt.Sprintf("The file %s is in the server's data directory, whose files are never readable as a user list.", path)
	case errors.Is(err, errTooLarge):
		return "The file is larger than 64 MiB."
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
// file's identity; when it says true, read returns (nil, nil).
func (p policy) read(ctx context.Context, path string, unchanged func(fileStat) bool) (*snapshot, error) {
	f, fi, err := p.open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := fileStat{fi: fi, size: fi.Size(), mtime: fi.ModTime()}
	if unchanged(st) {
		return nil, nil
	}
	if fi.Size() > maxFileSize {
		return nil, errTooLarge
	}
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()) + 512)
	if _, err := buf.ReadFrom(io.LimitReader(f, maxFileSize+1)); err != nil {
		return nil, err
	}
	if buf.Len() > maxFileSize {
		return nil, errTooLarge
	}
	snap, err := parse(ctx, buf.String())
	if err != nil {
		return nil, err
	}
	snap.stat = st
	return snap, nil
}
