package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver/builtin"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// The scale loader fills a fresh data directory with N passwd users and
// N HOTP tokens, token i owned by user i, in one realm, through the
// library (token.Service.Import in batches, then token.Service.Assign
// from many goroutines, which the store's group commit writes a few
// hundred at a time). It is for benchmarks only: it opens the data
// directory while no server runs on it, writes no audit entries for the
// tokens, and gives every token a key derived from its serial, so that
// the driver can compute the OTPs without a state file.

// scaleKeySalt derives the benchmark tokens' keys from their serials. It
// is not a secret: whoever knows it can compute every OTP of a scale
// data directory, which is the point (the driver needs them) and the
// reason such a directory must never hold real users.
const scaleKeySalt = "authbench scale benchmark keys (not secret)"

// Names of what the loader creates.
const (
	scaleRealm    = "scale"
	scaleResolver = "scale_passwd"
	scalePolicy   = "scale_otppin"
	scaleFirstUID = 100000
)

// scaleLogin is user i's login (i counts from 1): "u" and seven digits,
// so that logins sort as their numbers up to 9,999,999.
func scaleLogin(i int) string { return fmt.Sprintf("u%07d", i) }

// scaleSerial is the serial of user i's token.
func scaleSerial(i int) string { return fmt.Sprintf("SC%07d", i) }

// importSerial is the serial of the i-th token of the CSV import measure.
func importSerial(i int) string { return fmt.Sprintf("IM%07d", i) }

// scaleKey is the 20-byte HOTP key of serial.
func scaleKey(serial string) []byte {
	m := hmac.New(sha256.New, []byte(scaleKeySalt))
	m.Write([]byte(serial))
	return m.Sum(nil)[:keySize]
}

// loadStats is what a load took.
type loadStats struct {
	PasswdSeconds float64 `json:"passwd_seconds"`
	ImportSeconds float64 `json:"import_seconds"`
	AssignSeconds float64 `json:"assign_seconds"`
	TotalSeconds  float64 `json:"total_seconds"`
	DataBytes     int64   `json:"data_bytes"`
	PasswdBytes   int64   `json:"passwd_bytes"`
}

// loadOptions tune the loader.
type loadOptions struct {
	importBatch   int // tokens per Import transaction
	importWorkers int
	assignWorkers int
	log           io.Writer
}

// scaleLoad creates dataDir (which must not exist or be empty) with n
// users and tokens. The passwd file goes into the data directory's files
// subfolder, which the binary's default file roots allow.
func scaleLoad(ctx context.Context, dataDir string, n int, o loadOptions) (*loadStats, error) {
	began := time.Now()
	st := &loadStats{}
	files := filepath.Join(dataDir, authsrv.FilesDir)
	if err := os.MkdirAll(files, 0o700); err != nil {
		return nil, err
	}
	passwdPath := filepath.Join(files, "passwd")
	t0 := time.Now()
	if err := writeScalePasswd(passwdPath, n); err != nil {
		return nil, err
	}
	st.PasswdSeconds = round3(time.Since(t0).Seconds())
	if fi, err := os.Stat(passwdPath); err == nil {
		st.PasswdBytes = fi.Size()
	}

	s, err := authsrv.New(
		authsrv.WithDataDir(dataDir),
		authsrv.WithLogger(zerolog.Nop()),
		authsrv.WithResolverTypes(builtin.Types(builtin.WithFileRoots(files), builtin.WithDataDir(dataDir))),
		authsrv.WithFileRoots(files),
	)
	if err != nil {
		return nil, fmt.Errorf("opening %s with the library: %w", dataDir, err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	who := caller.Caller{UserAgent: "authbench-scale"}
	ops := s.Ops()
	if _, err := ops.SetResolver(ctx, who, scaleResolver, map[string]string{"type": "passwdresolver", "fileName": passwdPath}); err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	if _, failed, err := ops.SetRealm(ctx, who, scaleRealm, []realm.Entry{{Name: scaleResolver}}); err != nil || len(failed) > 0 {
		return nil, fmt.Errorf("realm %s: %v (failed resolvers %v)", scaleRealm, err, failed)
	}
	if _, err := ops.SetPolicy(ctx, who, policy.Policy{Name: scalePolicy, Scope: "authentication", Action: "otppin=none", Priority: 1,
		Realm: []string{scaleRealm}, Active: true}); err != nil {
		return nil, fmt.Errorf("policy %s: %w", scalePolicy, err)
	}
	// The owner template comes from the resolver itself, so the owners
	// written are the users validate will find.
	first, _, err := s.Realms().Resolve(ctx, scaleLogin(1), scaleRealm)
	if err != nil || !first.Found() {
		return nil, fmt.Errorf("resolving %s in %s: %v", scaleLogin(1), scaleRealm, err)
	}
	if first.UID != strconv.Itoa(scaleFirstUID+1) {
		return nil, fmt.Errorf("resolving %s: uid %q, want %d", scaleLogin(1), first.UID, scaleFirstUID+1)
	}
	owner := func(i int) user.User {
		return user.User{Login: scaleLogin(i), Realm: first.Realm, Resolver: first.Resolver, UID: strconv.Itoa(scaleFirstUID + i)}
	}

	t0 = time.Now()
	if err := scaleImport(ctx, s.Tokens(), n, o); err != nil {
		return nil, err
	}
	st.ImportSeconds = round3(time.Since(t0).Seconds())
	t0 = time.Now()
	if err := scaleAssign(ctx, s.Tokens(), n, owner, o); err != nil {
		return nil, err
	}
	st.AssignSeconds = round3(time.Since(t0).Seconds())
	// A spot check of the last token: owned by the last user.
	last, err := s.Tokens().Get(ctx, scaleSerial(n))
	if err != nil {
		return nil, err
	}
	if last.Owner == nil || last.Owner.Login != scaleLogin(n) {
		return nil, fmt.Errorf("token %s has no owner after the load", scaleSerial(n))
	}
	closed = true
	if err := s.Close(); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "authsrv.db")); err == nil {
		st.DataBytes = fi.Size()
	}
	st.TotalSeconds = round3(time.Since(began).Seconds())
	return st, nil
}

// writeScalePasswd writes users 1..n.
func writeScalePasswd(path string, n int) error {
	return writeAtomic(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		for i := 1; i <= n; i++ {
			uid := strconv.Itoa(scaleFirstUID + i)
			bw.WriteString(scaleLogin(i))
			bw.WriteString(":x:")
			bw.WriteString(uid)
			bw.WriteByte(':')
			bw.WriteString(uid)
			bw.WriteString(":Scale User,,,:/home/s:/bin/false\n")
		}
		return bw.Flush()
	})
}

// scaleImport creates tokens 1..n in batches, a few batches at a time.
func scaleImport(ctx context.Context, ts *token.Service, n int, o loadOptions) error {
	batch := max(o.importBatch, 1)
	var next atomic.Int64
	next.Store(1)
	var done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := progress(o.log, "import", n, &done)
	defer stop()
	for range max(o.importWorkers, 1) {
		wg.Go(func() {
			for ctx.Err() == nil {
				from := int(next.Add(int64(batch)) - int64(batch))
				if from > n {
					return
				}
				to := min(from+batch-1, n)
				recs := make([]token.ImportRecord, 0, to-from+1)
				for i := from; i <= to; i++ {
					serial := scaleSerial(i)
					recs = append(recs, token.ImportRecord{Serial: serial, Type: "hotp", Key: scaleKey(serial), Description: "authbench scale"})
				}
				got, failed := ts.Import(ctx, recs, []string{scaleRealm})
				if len(failed) > 0 || got != len(recs) {
					mu.Lock()
					if firstErr == nil {
						reason := ""
						if len(failed) > 0 {
							reason = failed[0].Serial + ": " + failed[0].Reason
						}
						firstErr = fmt.Errorf("import of %s..%s: %d of %d imported (%s)", scaleSerial(from), scaleSerial(to), got, len(recs), reason)
					}
					mu.Unlock()
					return
				}
				done.Add(int64(got))
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// scaleAssign gives token i to user i from many goroutines: each Assign
// is its own Update, and the store commits concurrent ones together.
func scaleAssign(ctx context.Context, ts *token.Service, n int, owner func(int) user.User, o loadOptions) error {
	var done atomic.Int64
	stop := progress(o.log, "assign", n, &done)
	defer stop()
	return forEach(ctx, max(o.assignWorkers, 1), n, func(ctx context.Context, i int) error {
		if err := ts.Assign(ctx, scaleSerial(i+1), owner(i+1), nil, false, false); err != nil {
			return fmt.Errorf("assigning %s: %w", scaleSerial(i+1), err)
		}
		done.Add(1)
		return nil
	})
}

// progress logs done/n every 10 s until the returned stop is called.
func progress(w io.Writer, what string, n int, done *atomic.Int64) func() {
	if w == nil {
		return func() {}
	}
	began := time.Now()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				d := done.Load()
				fmt.Fprintf(w, "scale: %s %d/%d (%.0f/s)\n", what, d, n, float64(d)/time.Since(began).Seconds())
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}
