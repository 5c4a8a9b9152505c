package piimport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/store"
	bolt "github.com/authsrv/authsrv/store/bolt"
)

// Options says what to import from where.
type Options struct {
	// Source is privacyIDEA's database: its SQLALCHEMY_DATABASE_URI
	// (sqlite:////path, mysql+pymysql://..., postgresql://...) or the path
	// of a SQLite file. It is only read.
	Source string
	// EncKey is the content of privacyIDEA's encKey file (PI_ENCFILE).
	EncKey []byte
	// Pepper is privacyIDEA's PI_PEPPER, which its local administrators'
	// password hashes need; nil leaves the administrators out.
	Pepper []byte
	// DataDir is the authsrv data directory to create. It must not exist
	// or be empty.
	DataDir string
	// DryRun does everything in a throw-away store and leaves DataDir
	// alone: the summary says what an import would bring over.
	DryRun bool
	// Relocate maps paths privacyIDEA's database names (a passwd file, a
	// hosts file, a CA's directory) to where those files are now: a
	// stored path equal to a key, or beneath it, is rewritten.
	Relocate map[string]string
	// ServerOptions open the new store (logger, KDF budget, file roots,
	// resolver types). The data directory is set by Import.
	ServerOptions []authsrv.Option
}

// ErrNotEmpty means the target data directory already holds something.
var ErrNotEmpty = errors.New("the data directory is not empty: import only into a new (absent or empty) directory")

// Result is what an import did.
type Result struct {
	Summary
	// Version is the privacyIDEA release the database belongs to.
	Version string
	// DataDir is the absolute data directory written (empty for a dry
	// run).
	DataDir string
}

// Imported counts the rows brought over.
func (r *Result) Imported() int {
	n := 0
	for _, row := range r.Rows {
		if row.Imported {
			n++
		}
	}
	return n
}

// Import reads privacyIDEA's database and brings it into a new data
// directory. Everything that can be refused is refused before anything is
// written: a wrong encKey, an unsupported privacyIDEA version, a data
// directory that is not empty or that a running server holds. The import
// writes into a new store beside DataDir and renames it into place only
// when every part is written; on an error nothing is left behind.
func Import(ctx context.Context, opt Options) (*Result, error) {
	keys, err := ParseEncKey(opt.EncKey)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opt.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", opt.DataDir, err)
	}
	if err := checkTarget(dir); err != nil {
		return nil, err
	}
	db, err := Open(ctx, opt.Source)
	if err != nil {
		return nil, err
	}
	snap, err := Read(ctx, db, keys)
	_ = db.Close()
	if err != nil {
		return nil, err
	}

	parent := filepath.Dir(dir)
	if opt.DryRun {
		parent = ""
	} else if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, ".authsrv-import-*")
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	moved := false
	defer func() {
		if !moved {
			_ = os.RemoveAll(tmp)
		}
	}()
	res := &Result{Version: snap.Version}
	if err := apply(ctx, tmp, snap, opt, &res.Summary); err != nil {
		return nil, err
	}
	if opt.DryRun {
		return res, nil
	}
	// The target was checked before the import; check again, since it may
	// have been created meanwhile, and then take its place.
	if err := checkTarget(dir); err != nil {
		return nil, err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("moving the imported data into %s: %w", dir, err)
	}
	moved = true
	if d, err := os.Open(parent); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	res.DataDir = dir
	return res, nil
}

// apply writes snap into a new Server on dir.
func apply(ctx context.Context, dir string, snap *Snapshot, opt Options, sum *Summary) error {
	opts := append(append([]authsrv.Option(nil), opt.ServerOptions...), authsrv.WithDataDir(dir))
	s, err := authsrv.New(opts...)
	if err != nil {
		return fmt.Errorf("creating the new store: %w", err)
	}
	defer func() { _ = s.Close() }()
	reloc := relocator(opt.Relocate)
	o := s.Ops()
	sum.Rows = append(sum.Rows, snap.Unread...)
	if err := importConfig(ctx, o, snap, reloc, sum); err != nil {
		return err
	}
	if err := importTokens(ctx, o, snap, sum); err != nil {
		return err
	}
	if err := importLate(ctx, o, snap, reloc, sum); err != nil {
		return err
	}
	if err := importAdmins(ctx, s, snap, opt.Pepper, sum); err != nil {
		return err
	}
	return s.Close()
}

// checkTarget refuses a data directory that holds anything, naming a
// running server's directory as such.
func checkTarget(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("data directory %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("data directory %s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	dbPath := filepath.Join(dir, authsrv.DBFile)
	if _, err := os.Stat(dbPath); err == nil {
		db, err := bolt.Open(dbPath, bolt.Options{Timeout: 300 * time.Millisecond})
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("data directory %s: %w", dir, authsrv.ErrInUse)
		}
		if err == nil {
			_ = db.Close()
		}
	}
	return fmt.Errorf("data directory %s: %w", dir, ErrNotEmpty)
}

// relocator rewrites a path by the longest matching prefix of m.
func relocator(m map[string]string) func(string) string {
	olds := make([]string, 0, len(m))
	for k := range m {
		olds = append(olds, filepath.Clean(k))
	}
	sort.Slice(olds, func(i, j int) bool { return len(olds[i]) > len(olds[j]) })
	return func(p string) string {
		if p == "" {
			return p
		}
		c := filepath.Clean(p)
		for _, old := range olds {
			if c == old {
				return filepath.Clean(m[old])
			}
			if rest, ok := strings.CutPrefix(c, old+string(filepath.Separator)); ok {
				return filepath.Join(m[old], rest)
			}
		}
		return p
	}
}

// WriteTable prints the summary as a table: kind, name, result, and the
// detail or the reason.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tRESULT\tDETAIL")
	for _, r := range s.Rows {
		result, detail := "imported", r.Detail
		if !r.Imported {
			result, detail = "not imported", r.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Kind, oneLine(r.Name), result, oneLine(detail))
	}
	return tw.Flush()
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
