package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	bbolt "go.etcd.io/bbolt"
)

// fullDisk makes the writes of a running server's data directory fail and
// work again: a small tmpfs that a file fills up, or, where mounting is not
// possible, the server process's file size limit (Go ignores SIGXFSZ, so
// the writes fail with EFBIG).
type fullDisk struct {
	name string
	// dataDir is the server's data directory (inside the mount).
	dataDir string
	fill    func(t *testing.T, pid int)
	free    func(t *testing.T, pid int)
	// reason is the operating system's word readyz and the log give.
	reason string
}

// tmpfsDisk mounts a 20 MiB tmpfs and fills it with a file; it reports
// false when mounting is not possible here.
func tmpfsDisk(t *testing.T) (*fullDisk, bool) {
	t.Helper()
	mnt, err := os.MkdirTemp("", "asfull")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(mnt) })
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Logf("mount tmpfs: %v %s", err, bytes.TrimSpace(out))
		return nil, false
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	filler := filepath.Join(mnt, "fill")
	return &fullDisk{
		name:    "tmpfs",
		dataDir: filepath.Join(mnt, "data"),
		reason:  "no space left on device",
		fill: func(t *testing.T, _ int) {
			f, err := os.Create(filler)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1<<20)
			var n int64
			for {
				m, err := f.Write(buf)
				n += int64(m)
				if err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("filling the tmpfs: %v", err)
					}
					break
				}
			}
			if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			t.Logf("filled the tmpfs with %d KiB", n>>10)
		},
		free: func(t *testing.T, _ int) {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		},
	}, true
}

// getFSize returns the file size limits of process pid.
func getFSize(pid int) (syscall.Rlimit, error) {
	var old syscall.Rlimit
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, 0, uintptr(unsafe.Pointer(&old)), 0, 0); e != 0 {
		return old, e
	}
	return old, nil
}

// prlimit sets the soft file size limit of process pid and returns the old
// limits.
func prlimit(pid int, soft uint64) (syscall.Rlimit, error) {
	old, err := getFSize(pid)
	if err != nil {
		return old, err
	}
	lim := syscall.Rlimit{Cur: soft, Max: old.Max}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		return old, e
	}
	return old, nil
}

// sizeLimitDisk lowers the server's file size limit to the store file's
// written data, so that every write needing new space fails with EFBIG.
func sizeLimitDisk(t *testing.T) *fullDisk {
	t.Helper()
	dir := shortDir(t)
	var old syscall.Rlimit
	return &fullDisk{
		name:    "file size limit",
		dataDir: dir,
		reason:  "file too large",
		fill: func(t *testing.T, pid int) {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(dir, "authsrv.db"), &st); err != nil {
				t.Fatal(err)
			}
			written := uint64(st.Blocks*512) &^ 4095
			var err error
			if old, err = prlimit(pid, written); err != nil {
				t.Fatalf("prlimit: %v", err)
			}
			t.Logf("file size limit of the server lowered to %d KiB (the store file's allocated blocks)", written>>10)
		},
		free: func(t *testing.T, pid int) {
			if _, err := prlimit(pid, old.Cur); err != nil {
				t.Fatalf("prlimit: %v", err)
			}
		},
	}
}

// TestServeDiskFull is catalogue row F5 against the binary: with the data
// directory full, reads answer, writes answer ERR902 with HTTP 503 (not a
// 500), no OTP is accepted unless its counter committed, readyz is 503
// with the reason, and the log says why once; once space is back, writes
// and readyz recover without a restart, the log says so once, and bbolt's
// check of the file passes after the server stops.
func TestServeDiskFull(t *testing.T) {
	mounted := false
	t.Run("tmpfs", func(t *testing.T) {
		d, ok := tmpfsDisk(t)
		if !ok {
			t.Skip("cannot mount a tmpfs here (needs root); the file size limit variant covers the row")
		}
		mounted = true
		testDiskFull(t, d)
	})
	t.Run("filesizelimit", func(t *testing.T) {
		if _, err := getFSize(os.Getpid()); err != nil {
			if os.Getenv("CI") != "" && !mounted {
				t.Fatalf("neither a tmpfs nor a file size limit can fill the disk here: prlimit: %v", err)
			}
			t.Skipf("prlimit: %v", err)
		}
		testDiskFull(t, sizeLimitDisk(t))
	})
}

// rfcOTPs are the HOTP values of RFC 4226's test key, counters 0 to 9.
var rfcOTPs = []string{"755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"}

const rfcKey = "3132333435363738393031323334353637383930"

func testDiskFull(t *testing.T, d *fullDisk) {
	env := map[string]string{"AUTHSRV_DATA_DIR": d.dataDir, "AUTHSRV_LOG_LEVEL": "info"}
	cmd, out, errs := child(t, env, "serve", "-listen", "127.0.0.1:0")
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	addr := servingRe.FindStringSubmatch(out.String())[2]
	jwt := adminToken(t, addr, passwordRe.FindStringSubmatch(out.String())[1])
	pid := cmd.Process.Pid

	// Tokens with RFC 4226's key; next[i] is the counter token i accepts
	// next. Each accepts its first OTP before the disk fills.
	next := make([]int, validators)
	for i := range validators {
		serial := fmt.Sprintf("FULL%d", i)
		if code, m := apiCall(t, http.MethodPost, addr, "/token/init", jwt, url.Values{"type": {"hotp"}, "otpkey": {rfcKey}, "serial": {serial}}); code != 200 {
			t.Fatalf("token init before: %d %v", code, m)
		}
		if code, m, err := validate(addr, serial, rfcOTPs[0]); err != nil || code != 200 || value(m) != true {
			t.Fatalf("validate before: %d %v %v", code, m, err)
		}
		next[i] = 1
	}
	if code, m := readyz(t, addr); code != 200 {
		t.Fatalf("readyz before: %d %v", code, m)
	}

	d.fill(t, pid)

	// Writes: the new error, never a 500. The first writes may still fit
	// in pages the file holds; a full disk shows within a few.
	refused := 0
	for i := range 40 {
		code, m := apiCall(t, http.MethodPost, addr, "/token/init", jwt, url.Values{"type": {"hotp"}, "genkey": {"1"}, "serial": {fmt.Sprintf("FULLX%02d", i)}})
		switch {
		case code == 200:
			continue
		case code == http.StatusServiceUnavailable && errCode(m) == 902 &&
			errMessage(m) == "ERR902: The server cannot store changes: the data directory has no space left.":
			refused++
		default:
			t.Fatalf("token init on a full disk: %d %v", code, m)
		}
		if refused == 3 {
			t.Logf("token init refused from write %d on", i-2)
			break
		}
	}
	if refused == 0 {
		t.Fatal("no write was refused on the full disk")
	}
	code, m := readyz(t, addr)
	if code != http.StatusServiceUnavailable || m["status"] != "not ready" || m["store"] != "store writes failing: "+d.reason {
		t.Errorf("readyz while writes fail: %d %v", code, m)
	}
	// Reads answer.
	if code, m := apiCall(t, http.MethodGet, addr, "/token/?serial=FULL0", jwt, nil); code != 200 || !strings.Contains(fmt.Sprint(m), "FULL0") {
		t.Errorf("GET /token/ on a full disk: %d %v", code, m)
	}
	if code, m := apiCall(t, http.MethodGet, addr, "/audit/", jwt, nil); code != 200 {
		t.Errorf("GET /audit/ on a full disk: %d %v", code, m)
	}
	if code, m := apiCall(t, http.MethodGet, addr, "/token/", "not-a-jwt", nil); code != 401 {
		t.Errorf("a refused request on a full disk: %d %v, want its 401", code, m)
	}
	// Correct OTPs from concurrent clients: value true only when the
	// counter committed; a refused one stays valid and is sent again.
	type acceptedOTP struct{ serial, otp string }
	var (
		mu              sync.Mutex
		accepted        []acceptedOTP
		validateRefused int
		wg              sync.WaitGroup
	)
	for i := range validators {
		wg.Go(func() {
			serial := fmt.Sprintf("FULL%d", i)
			for range 5 {
				otp := rfcOTPs[next[i]]
				code, m, err := validate(addr, serial, otp)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("validate on a full disk: %v", err)
				case code == 200 && value(m) == true:
					accepted = append(accepted, acceptedOTP{serial, otp})
					next[i]++
				case code == http.StatusServiceUnavailable && errCode(m) == 902:
					validateRefused++
				default:
					t.Errorf("validate on a full disk: %d %v", code, m)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("on the full disk, %d concurrent clients: %d correct OTPs refused with ERR902, %d accepted (their commit fit)",
		validators, validateRefused, len(accepted))
	if validateRefused == 0 {
		t.Error("every validate committed on the full disk: the refused path was not exercised")
	}
	if n := strings.Count(errs.String(), "store writes failing"); n != 1 {
		t.Errorf("the log says %d times that writes fail, want once:\n%s", n, errs.String())
	}
	if !strings.Contains(errs.String(), d.reason) {
		t.Errorf("the log does not give the reason %q", d.reason)
	}
	if strings.Contains(errs.String(), "Internal server error") || strings.Contains(errs.String(), `"status":500`) {
		t.Errorf("a request answered 500:\n%s", errs.String())
	}

	// Space comes back: readyz recovers without a write from a client.
	d.free(t, pid)
	start := time.Now()
	waitFor(t, "readyz to recover", func() bool { code, _ := readyz(t, addr); return code == 200 })
	t.Logf("readyz ready again %v after the space came back", time.Since(start).Round(time.Millisecond))
	if code, m := apiCall(t, http.MethodPost, addr, "/token/init", jwt, url.Values{"type": {"hotp"}, "genkey": {"1"}, "serial": {"FULLAFTER"}}); code != 200 {
		t.Errorf("token init after: %d %v", code, m)
	}
	for _, a := range accepted {
		if code, m, err := validate(addr, a.serial, a.otp); err != nil || code != 200 || value(m) != false {
			t.Errorf("an OTP accepted on the full disk is accepted again: %d %v %v", code, m, err)
		}
	}
	for i := range validators {
		if code, m, err := validate(addr, fmt.Sprintf("FULL%d", i), rfcOTPs[next[i]]); err != nil || code != 200 || value(m) != true {
			t.Errorf("validate after: %d %v %v", code, m, err)
		}
	}
	if n := strings.Count(errs.String(), "store writes work again"); n != 1 {
		t.Errorf("the log says %d times that writes work again, want once", n)
	}

	for _, line := range strings.Split(errs.String(), "\n") {
		if strings.Contains(line, `"component":"store"`) {
			t.Logf("log: %s", line)
		}
	}

	// Stop; bbolt's check of the file.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exit: %v\n%s", err, errs.String())
	}
	stopped = true
	db, err := bbolt.Open(filepath.Join(d.dataDir, "authsrv.db"), 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bbolt.Tx) error {
		var problems []string
		for err := range tx.Check() {
			problems = append(problems, err.Error())
		}
		if len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		return nil
	})
	if err != nil {
		t.Errorf("bbolt check: %v", err)
	}
}

// validators is the number of concurrent validating clients.
const validators = 4

// validate sends a /validate/check; it may run on any goroutine.
func validate(addr, serial, otp string) (int, map[string]any, error) {
	resp, err := http.PostForm("http://"+addr+"/validate/check", url.Values{"serial": {serial}, "pass": {otp}})
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, m, nil
}

func readyz(t *testing.T, addr string) (int, map[string]any) {
	t.Helper()
	return apiCall(t, http.MethodGet, addr, "/healthz/readyz", "", nil)
}

func value(m map[string]any) any {
	r, _ := m["result"].(map[string]any)
	return r["value"]
}

func errCode(m map[string]any) int {
	r, _ := m["result"].(map[string]any)
	e, _ := r["error"].(map[string]any)
	n, _ := e["code"].(float64)
	return int(n)
}

func errMessage(m map[string]any) string {
	r, _ := m["result"].(map[string]any)
	e, _ := r["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}
