package authsrv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/token"
)

// A backup is a tar stream with exactly these members.
const (
	manifestMember = "manifest.json"
	maxKeyMember   = 1 << 10
	maxManifest    = 1 << 16
)

// Manifest describes a backup.
type Manifest struct {
	// RolledForward is the number of tokens whose counters Restore moved
	// forward (not part of the archive).
	RolledForward int `json:"-"`

	Format   int       `json:"format"`
	Version  string    `json:"version"`
	Node     string    `json:"node"`
	Created  time.Time `json:"created"`
	DBBytes  int64     `json:"db_bytes"`
	Contents []string  `json:"contents"`
}

// ErrInUse means a running server holds the data directory.
var ErrInUse = errors.New("the data directory is in use by a running server: stop it first")

// Backup writes a consistent snapshot of the store, taken in one read
// transaction while the server keeps serving, together with the enckey and
// the JWT key ring, as a tar stream. Keep backups as secret as the data
// directory: whoever has one can read every secret in it.
func (s *Server) Backup(ctx context.Context, w io.Writer) (Manifest, error) {
	snap, ok := s.st.(store.Snapshotter)
	if !ok {
		return Manifest{}, errors.New("backup: the store cannot take snapshots")
	}
	// The snapshot's size is only known after writing it, and a tar header
	// needs it first: spool it to a private temporary file.
	tmp, err := os.CreateTemp(s.cfg.dataDir, ".backup-*.db")
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
	n, err := snap.Snapshot(ctx, tmp)
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: snapshot: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	ring, err := s.jwtKeys.marshal()
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	keys := []struct {
		name string
		data []byte
	}{{EncKeyFile, s.cfg.encKey}}
	// The jwtkey member while the ring holds that key (and it fits the
	// file, 32 bytes): the restored directory is then as this one, and an
	// earlier version finds the key it knows.
	if legacy, ok := s.jwtKeys.legacyKey(); ok && len(legacy) == secret.KeySize {
		keys = append(keys, struct {
			name string
			data []byte
		}{JWTKeyFile, legacy})
	}
	keys = append(keys, []struct {
		name string
		data []byte
	}{{JWTKeysFile, ring}, {AuditKeyFile, s.cfg.auditKey.Seed()}}...)
	m := Manifest{
		Format: 1, Version: Version, Node: s.cfg.nodeName, Created: s.cfg.now().UTC(),
		DBBytes: n, Contents: []string{DBFile},
	}
	for _, k := range keys {
		m.Contents = append(m.Contents, k.name)
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	tw := tar.NewWriter(w)
	add := func(name string, size int64, r io.Reader) error {
		hdr := &tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: m.Created, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := io.CopyN(tw, r, size)
		return err
	}
	if err := add(manifestMember, int64(len(mj)), bytes.NewReader(mj)); err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	for _, part := range keys {
		if err := add(part.name, int64(len(part.data)), bytes.NewReader(part.data)); err != nil {
			return Manifest{}, fmt.Errorf("backup: %w", err)
		}
	}
	if err := add(DBFile, n, tmp); err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	if err := tw.Close(); err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

// RestoreOptions tunes Restore.
type RestoreOptions struct {
	// Force allows replacing data in a directory that is not in use.
	Force bool
	// KeepCounters leaves OTP counters as they were in the backup (for a
	// planned migration). By default every TOTP's last used step is set
	// to now and every HOTP counter advances by its count window, so OTP
	// values used after the backup was taken cannot be replayed.
	KeepCounters bool
	// Now is the clock for the roll-forward (time.Now when nil).
	Now func() time.Time
}

// Restore unpacks a backup made by Backup into dir. It refuses a directory
// that a running server holds, and one that already has data unless Force
// is set. Only the known members are accepted (no paths, no links), and the
// restored enckey must open the restored data's canary before anything in
// dir is replaced.
func Restore(r io.Reader, dir string, opt RestoreOptions) (Manifest, error) {
	var m Manifest
	dbPath := filepath.Join(dir, DBFile)
	if _, err := os.Stat(dbPath); err == nil {
		db, err := bolt.Open(dbPath, bolt.Options{Timeout: 500 * time.Millisecond})
		if errors.Is(err, store.ErrLocked) {
			return m, fmt.Errorf("restore into %s: %w", dir, ErrInUse)
		}
		if err != nil {
			return m, fmt.Errorf("restore into %s: %w", dir, err)
		}
		_ = db.Close()
		if !opt.Force {
			return m, fmt.Errorf("restore into %s: it already holds data (use --force to replace it)", dir)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	staged := map[string]string{}
	defer func() {
		for _, p := range staged {
			_ = os.Remove(p)
		}
	}()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("restore: reading the backup: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return m, fmt.Errorf("restore: member %q is not a regular file", hdr.Name)
		}
		var limit int64
		switch hdr.Name {
		case manifestMember:
			limit = maxManifest
		case EncKeyFile, JWTKeyFile, AuditKeyFile:
			limit = maxKeyMember
		case JWTKeysFile:
			limit = maxJWTRingFile
		case DBFile:
			limit = hdr.Size
		default:
			return m, fmt.Errorf("restore: unexpected member %q", hdr.Name)
		}
		if _, dup := staged[hdr.Name]; dup {
			return m, fmt.Errorf("restore: member %q appears twice", hdr.Name)
		}
		if hdr.Size < 0 || hdr.Size > limit {
			return m, fmt.Errorf("restore: member %q is too large", hdr.Name)
		}
		p, err := stage(dir, hdr.Name, io.LimitReader(tr, hdr.Size))
		if p != "" {
			staged[hdr.Name] = p
		}
		if err != nil {
			return m, fmt.Errorf("restore: %w", err)
		}
	}
	for _, need := range []string{manifestMember, DBFile, EncKeyFile, AuditKeyFile} {
		if _, ok := staged[need]; !ok {
			return m, fmt.Errorf("restore: the backup has no %s", need)
		}
	}
	if err := checkStagedJWT(staged); err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	raw, err := os.ReadFile(staged[manifestMember])
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.Format != 1 {
		return m, errors.New("restore: the backup's manifest is not readable")
	}
	key, err := os.ReadFile(staged[EncKeyFile])
	if err != nil {
		return m, err
	}
	if err := verifyStaged(staged[DBFile], key); err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	if !opt.KeepCounters {
		seed, err := os.ReadFile(staged[AuditKeyFile])
		if err != nil {
			return m, err
		}
		now := opt.Now
		if now == nil {
			now = time.Now
		}
		if m.RolledForward, err = rollForward(staged[DBFile], seed, now); err != nil {
			return m, fmt.Errorf("restore: %w", err)
		}
	}
	for _, name := range []string{EncKeyFile, JWTKeyFile, AuditKeyFile} {
		if _, ok := staged[name]; !ok {
			continue
		}
		if err := os.Chmod(staged[name], 0o400); err != nil {
			return m, err
		}
	}
	for _, name := range []string{EncKeyFile, JWTKeyFile, JWTKeysFile, AuditKeyFile, DBFile} {
		if _, ok := staged[name]; !ok {
			// A JWT key file the backup does not have would stand for
			// the backup's keys: it goes.
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return m, fmt.Errorf("restore: %w", err)
			}
			continue
		}
		final := filepath.Join(dir, name)
		_ = os.Chmod(final, 0o600) // a 0400 key in the way is replaced by rename anyway
		if err := os.Rename(staged[name], final); err != nil {
			return m, fmt.Errorf("restore: %w", err)
		}
		delete(staged, name)
	}
	return m, syncDir(dir)
}

// checkStagedJWT checks the backup's JWT keys: a ring that parses, or a
// jwtkey of a backup made before the ring existed; with both, the ring's
// legacy key is the jwtkey.
func checkStagedJWT(staged map[string]string) error {
	ringPath, hasRing := staged[JWTKeysFile]
	keyPath, hasKey := staged[JWTKeyFile]
	if !hasRing && !hasKey {
		return fmt.Errorf("the backup has no %s and no %s", JWTKeysFile, JWTKeyFile)
	}
	var key []byte
	if hasKey {
		var err error
		if key, err = os.ReadFile(keyPath); err != nil {
			return err
		}
		if len(key) != secret.KeySize {
			return fmt.Errorf("the backup's %s is malformed", JWTKeyFile)
		}
	}
	if !hasRing {
		return nil
	}
	raw, err := os.ReadFile(ringPath)
	if err != nil {
		return err
	}
	keys, err := parseRing(raw)
	if err != nil {
		return fmt.Errorf("the backup's %s: %w", JWTKeysFile, err)
	}
	if hasKey {
		i := slices.IndexFunc(keys, func(k ringKey) bool { return k.Legacy })
		if i < 0 || !secret.Equal(keys[i].Key, key) {
			return fmt.Errorf("the backup's %s does not belong to its %s", JWTKeyFile, JWTKeysFile)
		}
	}
	return nil
}

// stage writes one member to a temporary file in dir and syncs it.
func stage(dir, name string, r io.Reader) (string, error) {
	f, err := os.CreateTemp(dir, ".restore-"+name+"-*")
	if err != nil {
		return "", err
	}
	p := f.Name()
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return p, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return p, err
	}
	return p, f.Close()
}

// verifyStaged opens the restored store and checks its canary with the
// restored enckey.
func verifyStaged(dbPath string, key []byte) error {
	db, err := bolt.Open(dbPath, bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("the backup's store does not open: %w", err)
	}
	defer func() { _ = db.Close() }()
	sealer, err := secret.NewSealer(rand.Reader, key)
	if err != nil {
		return fmt.Errorf("the backup's enckey: %w", err)
	}
	var canary []byte
	if err := db.View(context.Background(), func(tx store.Tx) error {
		canary = append([]byte(nil), tx.Bucket(serverBucket).Get(canaryKey)...)
		return nil
	}); err != nil {
		return err
	}
	if len(canary) == 0 || sealer.CheckCanary(canary) != nil {
		return ErrWrongKey
	}
	return nil
}

// rollForward moves the restored tokens' counters past anything used
// after the backup and records that in the restored audit log.
func rollForward(dbPath string, auditSeed []byte, now func() time.Time) (int, error) {
	if len(auditSeed) != ed25519.SeedSize {
		return 0, errors.New("the backup's audit key is malformed")
	}
	db, err := bolt.Open(dbPath, bolt.Options{Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	n, err := token.RollForward(ctx, db, now(), token.Settings{})
	if err != nil {
		return 0, err
	}
	lg, err := audit.New(audit.Config{Store: db, Key: ed25519.NewKeyFromSeed(auditSeed), Now: now})
	if err != nil {
		return n, err
	}
	_, err = lg.Write(ctx, audit.Entry{Action: "RESTORE", Success: true, Date: now().UTC(), StartDate: now().UTC(),
		Info: fmt.Sprintf("backup restored; OTP counters of %d tokens moved forward against replay", n)})
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
