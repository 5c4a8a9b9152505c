package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// compact is "authsrv compact": it rewrites the data directory's store
// without the pages that deleted data (audit entries removed by the
// retention, above all) left free. bbolt reuses free pages but never gives
// them back to the file system, so only this shrinks the file. It runs
// with the server stopped: it holds the store's lock, and a running
// server's lock makes it fail.
func (e *env) compact(args []string) error {
	var c common
	fs := e.flags("compact", &c)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := c.notOnPostgres("compact", "PostgreSQL reclaims space with its own VACUUM"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := c.requireDataDir(false); err != nil {
		return err
	}
	seed, err := os.ReadFile(filepath.Join(c.dataDir, authsrv.AuditKeyFile))
	if err != nil {
		return fmt.Errorf("the audit key: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return fmt.Errorf("the audit key in %s is not %d bytes", c.dataDir, ed25519.SeedSize)
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	var rep audit.Report
	path := filepath.Join(c.dataDir, authsrv.DBFile)
	res, err := bolt.Compact(e.ctx, path, bolt.CompactOptions{
		Timeout: c.openTimeout,
		Verify: func(ctx context.Context, s store.Store) error {
			var err error
			if rep, err = audit.VerifyStore(ctx, s, pub); err != nil {
				return fmt.Errorf("audit verify: %w", err)
			}
			if !rep.OK() {
				return fmt.Errorf("audit verify: %d problems, the first at entry %d: %s (authsrv audit verify lists them)",
					len(rep.Problems), rep.Problems[0].Number, rep.Problems[0].Kind)
			}
			return nil
		},
	})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w; stop the server first: compact works offline", err)
	}
	if err != nil {
		return err
	}
	pct := 0.0
	if res.Before > 0 {
		pct = 100 * float64(res.Before-res.After) / float64(res.Before)
	}
	fmt.Fprintf(e.stdout, "compacted %s: %d → %d bytes (%.0f %% smaller); audit log: %d entries (%d..%d): OK\n",
		path, res.Before, res.After, pct, rep.Entries, rep.First, rep.Last)
	return nil
}
