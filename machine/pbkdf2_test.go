package machine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/machine"
)

// Known answers made with Python's hashlib.pbkdf2_hmac("sha512", ...),
// encoded as passlib's pbkdf2_sha512 writes them.
var pbkdf2Vectors = []struct{ hash, password string }{
	{"$pbkdf2-sha512$6549$AQIDBAUGBwgJCg$TxR0c5DfuuXZphr2QgVWlYAwrC4xiNACTqSDX.a07It1r1YuVuhe3NCs3FEPV1nRZvp1UmHW.GoIspewdqGnAw", "1234287082"},
	{"$pbkdf2-sha512$1$.//..//..//.AA$eaxRbmzCJtS3bPw.CTJgmJY7pfF3ZRVSKDsXg2Yh/jczs9ABZWQ2W3a.Jk/bkMIekm.OAm7MPPOtT5MF6xLsXQ", "pä755224"},
}

var passlibFormat = regexp.MustCompile(`^\$pbkdf2-sha512\$([0-9]+)\$([A-Za-z0-9./]{14})\$([A-Za-z0-9./]{86})$`)

func TestPBKDF2KnownAnswers(t *testing.T) {
	for i, v := range pbkdf2Vectors {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			ok, err := machine.PBKDF2Verify(v.hash, v.password)
			if err != nil || !ok {
				t.Fatalf("Verify(right password) = %v, %v", ok, err)
			}
			ok, err = machine.PBKDF2Verify(v.hash, v.password+"0")
			if err != nil || ok {
				t.Fatalf("Verify(wrong password) = %v, %v", ok, err)
			}
		})
	}
}

func TestPBKDF2HashRoundTrip(t *testing.T) {
	rnd := bytes.NewReader(bytes.Repeat([]byte{0xfb, 0xff, 0xfe}, 100))
	h, err := machine.PBKDF2Hash("test359152", 25, rnd)
	if err != nil {
		t.Fatal(err)
	}
	m := passlibFormat.FindStringSubmatch(h)
	if m == nil || m[1] != "25" {
		t.Fatalf("hash %q is not in passlib's format with 25 rounds", h)
	}
	// The salt bytes fb ff fe use '/' and the adapted '.' for '+'.
	if !strings.HasPrefix(m[2], ".//.") {
		t.Errorf("salt %q: want the adapted base64 of fb ff fe ...", m[2])
	}
	if ok, err := machine.PBKDF2Verify(h, "test359152"); err != nil || !ok {
		t.Errorf("Verify = %v, %v", ok, err)
	}
	if ok, _ := machine.PBKDF2Verify(h, "test359153"); ok {
		t.Error("a wrong password verified")
	}
	for _, rounds := range []int{0, -1, machine.PBKDF2MaxRounds + 1} {
		if _, err := machine.PBKDF2Hash("x", rounds, rnd); err == nil {
			t.Errorf("rounds %d accepted", rounds)
		}
	}
	if _, err := machine.PBKDF2Hash("x", 1, bytes.NewReader(nil)); err == nil {
		t.Error("a failing random source gave a hash")
	}
}

func TestPBKDF2VerifyRefusesMalformed(t *testing.T) {
	good := pbkdf2Vectors[0].hash
	parts := strings.Split(good, "$") // "", "pbkdf2-sha512", rounds, salt, sum
	for name, h := range map[string]string{
		"other scheme":    strings.Replace(good, "sha512", "sha256", 1),
		"no rounds":       "$pbkdf2-sha512$$" + parts[3] + "$" + parts[4],
		"zero rounds":     "$pbkdf2-sha512$0$" + parts[3] + "$" + parts[4],
		"too many rounds": "$pbkdf2-sha512$1000001$" + parts[3] + "$" + parts[4],
		"leading zero":    "$pbkdf2-sha512$06549$" + parts[3] + "$" + parts[4],
		"sign":            "$pbkdf2-sha512$+6549$" + parts[3] + "$" + parts[4],
		"bad salt":        "$pbkdf2-sha512$6549$A!$" + parts[4],
		"short checksum":  "$pbkdf2-sha512$6549$" + parts[3] + "$" + parts[4][:40],
		"missing part":    "$pbkdf2-sha512$6549$" + parts[3],
		"extra part":      good + "$x",
		"empty":           "",
	} {
		t.Run(name, func(t *testing.T) {
			ok, err := machine.PBKDF2Verify(h, pbkdf2Vectors[0].password)
			if ok || !errors.Is(err, machine.ErrPBKDF2Format) {
				t.Errorf("Verify(%q) = %v, %v; want ErrPBKDF2Format", h, ok, err)
			}
		})
	}
}

func TestPBKDF2AgainstPythonHashlib(t *testing.T) {
	rnd := bytes.NewReader(bytes.Repeat([]byte("0123456789abcdef"), 100))
	var cases []pyCase
	for i, pw := range []string{"755224", "test287082", "pä€359152", ""} {
		h, err := machine.PBKDF2Hash(pw, 10+i*1000, rnd)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, pyCase{Hash: h, Password: pw, Want: true}, pyCase{Hash: h, Password: pw + "1", Want: false})
	}
	pythonVerify(t, cases)
}

// pyCase is one hash for Python to verify with hashlib.pbkdf2_hmac.
type pyCase struct {
	Hash     string `json:"hash"`
	Password string `json:"password"`
	Want     bool   `json:"want"`
}

// pyVerifier verifies passlib pbkdf2_sha512 hashes with hashlib alone
// (no passlib): it reads JSON cases and prints one JSON list of results.
const pyVerifier = `
import base64, hashlib, hmac, json, sys
def ab64(s):
    s = s.replace(".", "+")
    return base64.b64decode(s + "=" * (-len(s) % 4))
out = []
for c in json.load(sys.stdin):
    _, scheme, rounds, salt, chk = c["hash"].split("$")
    assert scheme == "pbkdf2-sha512", scheme
    dk = hashlib.pbkdf2_hmac("sha512", c["password"].encode("utf-8"), ab64(salt), int(rounds))
    out.append(len(ab64(salt)) == 10 and hmac.compare_digest(dk, ab64(chk)))
print(json.dumps(out))
`

// pythonVerify has Python check every case; it skips without python3,
// except under CI, where that is a failure.
func pythonVerify(t *testing.T, cases []pyCase) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is missing; CI needs it to cross-check the PBKDF2 hashes")
		}
		t.Skip("python3 not found: the hashlib cross-check is skipped")
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), py, "-c", pyVerifier)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v: %s", err, stderr.String())
	}
	var got []bool
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("python3 answered %q (%v)", out, err)
	}
	for i, c := range cases {
		if got[i] != c.Want {
			t.Errorf("hashlib verification of case %d (%s) = %v, want %v", i, c.Hash, got[i], c.Want)
		}
	}
}
