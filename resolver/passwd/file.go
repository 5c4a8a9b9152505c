package passwd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// maxFileSize caps what a load reads: a million users fit comfortably.
const maxFileSize = 64 << 20

var (
	errNotAbsolute = errors.New("passwd: the file name is not an absolute path")
	errOutside     = errors.New("passwd: the file is outside the allowed directories")
	errDataDir     = errors.New("passwd: the file is in the server's data directory")
	errSystem      = errors.New("passwd: the file is in a kernel pseudo file system")
	errNotRegular  = errors.New("passwd: the file is not a regular file")
	errTooLarge    = errors.New("passwd: the file is larger than 64 MiB")
)

// describe turns a load error on path into the short text shown by Test
// and by configuration errors (no OS error text, nothing read from the
// file). The refusals name the rule that refused.
func describe(err error, path string) string {
	switch {
	case errors.Is(err, errNotAbsolute):
		return "The file name must be an absolute path."
	case errors.Is(err, errOutside):
		return fmt.Sprintf("The file %s is outside the allowed directories (the server's file roots).", path)
	case errors.Is(err, errDataDir):
		return fmt.Sprintf("The file %s is in the server's data directory, whose files are never readable as a user list.", path)
	case errors.Is(err, errSystem):
		return "Files under /proc, /sys and /dev are not allowed."
	case errors.Is(err, errNotRegular):
		return "The file is not a regular file."
	case errors.Is(err, errTooLarge):
		return "The file is larger than 64 MiB."
	case errors.Is(err, fs.ErrNotExist):
		return "The file does not exist."
	case errors.Is(err, fs.ErrPermission):
		return "The file cannot be read (permission denied)."
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "The test was cancelled or timed out."
	}
	return "The file cannot be read."
}

// filesDir is the data directory's subfolder that stays readable.
const filesDir = "files"

// policy decides which files may be opened.
type policy struct {
	roots   []string // none = anywhere
	dataDir string   // "" = no data directory to protect
}

// lexical checks the configured path without touching the file system.
func (p policy) lexical(path string) error {
	if path == "" || strings.IndexByte(path, 0) >= 0 || !filepath.IsAbs(path) {
		return errNotAbsolute
	}
	clean := filepath.Clean(path)
	if systemPath(clean) {
		return errSystem
	}
	if p.dataDir != "" {
		if dir, err := filepath.Abs(p.dataDir); err == nil && p.inDataDir(dir, clean) {
			return errDataDir
		}
	}
	if len(p.roots) > 0 {
		for _, root := range p.roots {
			if _, ok := within(filepath.Clean(root), clean); ok {
				return nil
			}
		}
		return errOutside
	}
	return nil
}

// inDataDir reports whether path is the data directory dir or lies
// beneath it anywhere but in its files subfolder (both clean, absolute).
func (p policy) inDataDir(dir, path string) bool {
	if path == dir {
		return true
	}
	if _, ok := within(dir, path); !ok {
		return false
	}
	_, inFiles := within(filepath.Join(dir, filesDir), path)
	return !inFiles
}

// dataDirReal returns the data directory with its symbolic links resolved
// (or cleaned, when it does not exist yet).
func (p policy) dataDirReal() (string, error) {
	dir, err := filepath.Abs(p.dataDir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return dir, nil
}

// validate is the save-time check: the lexical rules, and when the file
// exists, the rules on what it resolves to. A missing or unreadable file
// is accepted (it may be created later; Test reports it).
func (p policy) validate(path string) error {
	f, _, err := p.open(path)
	if err == nil {
		_ = f.Close()
		return nil
	}
	for _, refused := range []error{errNotAbsolute, errOutside, errDataDir, errSystem, errNotRegular} {
		if errors.Is(err, refused) {
			return configErr(describe(err, path))
		}
	}
	return nil
}

// open opens the file for reading after the lexical checks, resolving
// symbolic links and checking the target: not in the data directory,
// inside a root (opened through os.Root, so a component swapped for a
// symlink cannot escape), not a pseudo file system, a regular file
// (checked before opening, so a FIFO or device is never opened, and again
// on the open descriptor). The checks run on every load, not only when
// the configuration is saved.
func (p policy) open(path string) (*os.File, fs.FileInfo, error) {
	if err := p.lexical(path); err != nil {
		return nil, nil, err
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		return nil, nil, err
	}
	if systemPath(real) {
		return nil, nil, errSystem
	}
	if p.dataDir != "" {
		dir, err := p.dataDirReal()
		if err != nil {
			return nil, nil, err
		}
		if p.inDataDir(dir, real) {
			return nil, nil, errDataDir
		}
	}
	var f *os.File
	if len(p.roots) == 0 {
		if fi, err := os.Stat(real); err != nil {
			return nil, nil, err
		} else if !fi.Mode().IsRegular() {
			return nil, nil, errNotRegular
		}
		f, err = os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		f, err = openBeneathAny(p.roots, real)
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, errNotRegular
	}
	if p.dataDir != "" && p.isDataFile(fi) {
		// A hard link to a key, or a component swapped after the checks.
		_ = f.Close()
		return nil, nil, errDataDir
	}
	return f, fi, nil
}

// isDataFile reports whether the opened file is one of the files directly
// in the data directory (the keys, the store, the socket).
func (p policy) isDataFile(fi fs.FileInfo) bool {
	dir, err := p.dataDirReal()
	if err != nil {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false // no data directory (yet): nothing in it to protect
	}
	for _, e := range entries {
		if e.Name() == filesDir {
			continue
		}
		if dfi, err := os.Lstat(filepath.Join(dir, e.Name())); err == nil && os.SameFile(fi, dfi) {
			return true
		}
	}
	return false
}

// openBeneathAny opens the symlink-free path real beneath the first root
// (resolved) that holds it; a root that does not exist holds nothing.
func openBeneathAny(roots []string, real string) (*os.File, error) {
	for _, root := range roots {
		rootReal, err := filepath.EvalSymlinks(filepath.Clean(root))
		if err != nil {
			continue
		}
		if _, ok := within(rootReal, real); ok {
			return openBeneath(rootReal, real)
		}
	}
	return nil, errOutside
}

// openBeneath opens the symlink-free path real through an os.Root on the
// resolved root rootReal.
func openBeneath(rootReal, real string) (*os.File, error) {
	rel, ok := within(rootReal, real)
	if !ok {
		return nil, errOutside
	}
	r, err := os.OpenRoot(rootReal)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if fi, err := r.Stat(rel); err != nil {
		if strings.Contains(err.Error(), "escapes") {
			return nil, errOutside
		}
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil && strings.Contains(err.Error(), "escapes") {
		return nil, errOutside
	}
	return f, err
}

// within returns path relative to root when it lies strictly beneath it.
func within(root, path string) (string, bool) {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." || !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}

// systemPath reports whether clean is in a kernel pseudo file system,
// whose "regular" files (/proc/self/environ) are not user lists.
func systemPath(clean string) bool {
	for _, dir := range []string{"/proc", "/sys", "/dev"} {
		if clean == dir || strings.HasPrefix(clean, dir+"/") {
			return true
		}
	}
	return false
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
