// Package fileroot confines the files an administrator may name in the
// configuration (a passwd resolver's file, an LDAP resolver's CA file, an
// SMTP server's S/MIME key and certificate) to the directory trees the
// operator chose, and keeps the server's data directory (its keys, its
// store, its control socket) out of reach whatever the roots say
// (shared/spec reliability A10, B7).
//
// A Confinement is checked twice: when a configuration is saved (Check, so
// that a refused name never gets stored) and every time the file is opened
// (Open, ReadFile), because a file that was allowed may since have been
// replaced by a link to one that is not.
//
// The rules, each with its own error so that a refusal can name it:
//
//   - the name is an absolute path without NUL bytes (ErrNotAbsolute);
//   - neither the name nor what it resolves to lies in a kernel pseudo file
//     system, /proc, /sys or /dev (ErrSystem);
//   - neither the name nor its real path (symbolic links and .. resolved)
//     is the data directory or lies beneath it, except beneath its files
//     subfolder; the opened file is compared with the data directory's
//     entries, which catches a hard link to a key (ErrDataDir);
//   - with roots, the real path lies beneath one of them, and is opened
//     through an os.Root on that root, so that a component swapped for a
//     symbolic link between the check and the open cannot lead outside
//     (ErrOutside);
//   - the file is a regular file, checked before opening (a FIFO or device
//     is never opened) and again on the open descriptor (ErrNotRegular).
//
// Package fileroot imports only the standard library.
package fileroot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FilesDir is the data directory's subfolder whose files stay readable:
// the place an operator puts files the configuration names.
const FilesDir = "files"

// The rules a refused name broke.
var (
	ErrNotAbsolute = errors.New("fileroot: the file name is not an absolute path")
	ErrOutside     = errors.New("fileroot: the file is outside the allowed directories")
	ErrDataDir     = errors.New("fileroot: the file is in the server's data directory")
	ErrSystem      = errors.New("fileroot: the file is in a kernel pseudo file system")
	ErrNotRegular  = errors.New("fileroot: the file is not a regular file")
	ErrTooLarge    = errors.New("fileroot: the file is larger than the limit")
)

// rules are the errors Check reports as a refusal.
var rules = []error{ErrNotAbsolute, ErrOutside, ErrDataDir, ErrSystem, ErrNotRegular}

// Refused reports whether err is a refusal by one of the rules (as opposed
// to a file that is missing or cannot be read).
func Refused(err error) bool {
	for _, r := range rules {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// Describe turns an error of Check, Open or ReadFile on path into a short
// text for an administrator: a refusal names its rule; other errors say
// what happened without the operating system's text.
func Describe(err error, path string) string {
	switch {
	case errors.Is(err, ErrNotAbsolute):
		return "The file name must be an absolute path."
	case errors.Is(err, ErrOutside):
		return fmt.Sprintf("The file %s is outside the allowed directories (the server's file roots).", path)
	case errors.Is(err, ErrDataDir):
		return fmt.Sprintf("The file %s is in the server's data directory, whose files are never readable through the configuration.", path)
	case errors.Is(err, ErrSystem):
		return "Files under /proc, /sys and /dev are not allowed."
	case errors.Is(err, ErrNotRegular):
		return "The file is not a regular file."
	case errors.Is(err, ErrTooLarge):
		return "The file is too large."
	case errors.Is(err, fs.ErrNotExist):
		return "The file does not exist."
	case errors.Is(err, fs.ErrPermission):
		return "The file cannot be read (permission denied)."
	}
	return "The file cannot be read."
}

// Confinement says which files an administrator may name. The zero value
// allows any regular file outside /proc, /sys and /dev.
type Confinement struct {
	// Roots are the directory trees a file must lie beneath after its
	// symbolic links are resolved (any one of them); none means anywhere.
	// They are resolved at every check, so they need not exist yet.
	Roots []string
	// DataDir is the server's data directory: nothing in it or beneath it
	// is ever read, except beneath its files subfolder. "" protects none.
	DataDir string
}

// Copy returns c with its own copy of Roots.
func (c Confinement) Copy() Confinement {
	c.Roots = append([]string(nil), c.Roots...)
	return c
}

// CheckName applies the rules that need no file system: an absolute name,
// not in /proc, /sys or /dev, not in the data directory (but for its files
// subfolder), beneath a root when there are roots.
func (c Confinement) CheckName(path string) error {
	if path == "" || strings.IndexByte(path, 0) >= 0 || !filepath.IsAbs(path) {
		return ErrNotAbsolute
	}
	clean := filepath.Clean(path)
	if systemPath(clean) {
		return ErrSystem
	}
	if c.DataDir != "" {
		if dir, err := filepath.Abs(c.DataDir); err == nil && inDataDir(dir, clean) {
			return ErrDataDir
		}
	}
	if len(c.Roots) > 0 {
		for _, root := range c.Roots {
			if _, ok := within(filepath.Clean(root), clean); ok {
				return nil
			}
		}
		return ErrOutside
	}
	return nil
}

// Check is the save-time check: the rules of CheckName, and when the file
// exists, the rules on what it resolves to. It returns nil or a refusal
// (Refused reports true): a file that is missing or unreadable is
// accepted, since it may be created later.
func (c Confinement) Check(path string) error {
	f, err := c.Open(path)
	if err == nil {
		_ = f.Close()
		return nil
	}
	if Refused(err) {
		return err
	}
	return nil
}

// ReadFile opens path under the rules and reads it whole; a file larger
// than limit bytes gives ErrTooLarge.
func (c Confinement) ReadFile(path string, limit int64) ([]byte, error) {
	f, err := c.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}

// Open opens path for reading under every rule: the name first, then its
// real path, then the open descriptor (see the package comment).
func (c Confinement) Open(path string) (*os.File, error) {
	if err := c.CheckName(path); err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	if systemPath(real) {
		return nil, ErrSystem
	}
	if c.DataDir != "" {
		dir, err := c.dataDirReal()
		if err != nil {
			return nil, err
		}
		if inDataDir(dir, real) {
			return nil, ErrDataDir
		}
	}
	var f *os.File
	if len(c.Roots) == 0 {
		if fi, err := os.Stat(real); err != nil {
			return nil, err
		} else if !fi.Mode().IsRegular() {
			return nil, ErrNotRegular
		}
		f, err = os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		f, err = openBeneathAny(c.Roots, real)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, ErrNotRegular
	}
	if c.DataDir != "" && c.isDataFile(fi) {
		// A hard link to a key, or a component swapped after the checks.
		_ = f.Close()
		return nil, ErrDataDir
	}
	return f, nil
}

// inDataDir reports whether path is the data directory dir or lies
// beneath it anywhere but in its files subfolder (both clean, absolute).
func inDataDir(dir, path string) bool {
	if path == dir {
		return true
	}
	if _, ok := within(dir, path); !ok {
		return false
	}
	_, inFiles := within(filepath.Join(dir, FilesDir), path)
	return !inFiles
}

// dataDirReal returns the data directory with its symbolic links resolved
// (or cleaned, when it does not exist yet).
func (c Confinement) dataDirReal() (string, error) {
	dir, err := filepath.Abs(c.DataDir)
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

// isDataFile reports whether the opened file is one of the files directly
// in the data directory (the keys, the store, the socket).
func (c Confinement) isDataFile(fi fs.FileInfo) bool {
	dir, err := c.dataDirReal()
	if err != nil {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false // no data directory (yet): nothing in it to protect
	}
	for _, e := range entries {
		if e.Name() == FilesDir {
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
	return nil, ErrOutside
}

// openBeneath opens the symlink-free path real through an os.Root on the
// resolved root rootReal.
func openBeneath(rootReal, real string) (*os.File, error) {
	rel, ok := within(rootReal, real)
	if !ok {
		return nil, ErrOutside
	}
	r, err := os.OpenRoot(rootReal)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	if fi, err := r.Stat(rel); err != nil {
		if strings.Contains(err.Error(), "escapes") {
			return nil, ErrOutside
		}
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil && strings.Contains(err.Error(), "escapes") {
		return nil, ErrOutside
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
// whose "regular" files (/proc/self/environ) hold no configuration.
func systemPath(clean string) bool {
	for _, dir := range []string{"/proc", "/sys", "/dev"} {
		if clean == dir || strings.HasPrefix(clean, dir+"/") {
			return true
		}
	}
	return false
}
