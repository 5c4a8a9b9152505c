package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to change the alembic revision of a copy of the fixture

	iotp "github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/testsvc"
)

// The end-to-end tests of "authsrv import privacyidea": a real
// privacyIDEA 3.10.2 database is imported, the imported data directory is
// served, and every token of the fixture logs in over HTTP with an OTP
// computed only from the fixture's manifest, as privacyIDEA itself
// accepted (or rejected) it.

// piManifest is the part of the fixture's manifest.json the tests use.
type piManifest struct {
	PICfg struct {
		Pepper    string `json:"PI_PEPPER"`
		SecretKey string `json:"SECRET_KEY"`
	} `json:"pi_cfg"`
	Secrets struct {
		EncKeyHex    string `json:"enckey_hex"`
		SMTPPassword string `json:"smtp_password"`
		SMSPassword  string `json:"sms_gateway_password"`
		RadiusSecret string `json:"radius_secret"`
	} `json:"secrets"`
	Install struct {
		Admin struct {
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"admin"`
	} `json:"install"`
	SMSGateways      []map[string]any          `json:"smsgateways"`
	Resolvers        map[string]map[string]any `json:"resolvers"`
	Realms           map[string]map[string]any `json:"realms"`
	DefaultRealm     string                    `json:"default_realm"`
	SMTPServers      map[string]map[string]any `json:"smtpservers"`
	RadiusServers    map[string]map[string]any `json:"radiusservers"`
	MachineResolvers map[string]map[string]any `json:"machineresolvers"`
	ServiceIDs       map[string]map[string]any `json:"serviceids"`
	CAConnectors     map[string]map[string]any `json:"caconnectors"`
	Policies         []struct {
		Name string `json:"name"`
	} `json:"policies"`
	EventHandlers []struct {
		Name string `json:"name"`
	} `json:"event_handlers"`
	Tokens       []piToken `json:"tokens"`
	Verification struct {
		When    string           `json:"when_utc"`
		Results []piVerification `json:"results"`
	} `json:"verification"`
}

// piToken is a token of the manifest (token_field_legend explains the
// fields).
type piToken struct {
	Serial           string            `json:"serial"`
	Type             string            `json:"type"`
	Description      string            `json:"description"`
	Active           bool              `json:"active"`
	Revoked          bool              `json:"revoked"`
	FailCount        int               `json:"failcount"`
	MaxFail          int               `json:"maxfail"`
	TokenRealms      []string          `json:"token_realms"`
	InfoSetViaAPI    map[string]string `json:"tokeninfo_set_via_api"`
	User             *string           `json:"user"`
	UserRealm        *string           `json:"user_realm"`
	OTPKeyHex        *string           `json:"otpkey_hex"`
	OTPKeyText       string            `json:"otpkey_text"`
	PIN              string            `json:"pin"`
	ValidatePIN      string            `json:"validate_pin"`
	Hashlib          *string           `json:"hashlib"`
	OTPLen           int               `json:"otplen"`
	Counter          uint64            `json:"counter"`
	State            string            `json:"state"`
	NextOTPCounter   *uint64           `json:"next_otp_counter"`
	TimestepSeconds  int64             `json:"timestep_seconds"`
	MOTPPIN          string            `json:"motppin"`
	PrintedOTPs      map[string]string `json:"printed_otps"`
	TANs             map[string]string `json:"tans"`
	Password         string            `json:"password"`
	RegistrationCode string            `json:"registrationcode"`
	Secret           string            `json:"secret"`
	Questions        map[string]string `json:"questions"`
	SSHKey           string            `json:"sshkey"`
	AESKeyHex        string            `json:"aes_key_hex"`
	PublicIDModhex   string            `json:"public_id_modhex"`
	PrivateUIDHex    string            `json:"private_uid_hex"`
}

// piVerification is one result of the manifest's final check against the
// live privacyIDEA.
type piVerification struct {
	Serial   string `json:"serial"`
	Type     string `json:"type"`
	Expected string `json:"expected"`
	How      string `json:"how"`
	PassSent string `json:"pass_sent"`
	OK       bool   `json:"ok"`
	// AuthItemsReturned are the keys of the answer's auth_items.
	AuthItemsReturned []string `json:"auth_items_returned"`
	Authitem          []struct {
		Params map[string]string `json:"params"`
		SSH    []map[string]any  `json:"ssh"`
	} `json:"authitem"`
}

// piFixtureDir is the privacyIDEA 3.10.2 fixture the repository keeps
// (piimport/testdata).
func piFixtureDir(t *testing.T) string {
	t.Helper()
	return testsvc.PrivacyIDEAFixtureDir(t)
}

// loadPIManifest reads the fixture's manifest.
func loadPIManifest(t *testing.T, fixture string) *piManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m piManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(m.Tokens) == 0 || len(m.Verification.Results) == 0 {
		t.Fatal("manifest.json lists no tokens or no verification")
	}
	return &m
}

// piCopy is the fixture copied into a temporary directory (the fixture
// directory is read-only), with the pepper written to a file.
type piCopy struct {
	dir, db, enckey, pepper string
}

// copyPIFixture copies the files an import reads into t.TempDir().
func copyPIFixture(t *testing.T, fixture string, m *piManifest) piCopy {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(fixture, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fixture, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	c := piCopy{dir: dir, db: filepath.Join(dir, "pi.sqlite"), enckey: filepath.Join(dir, "enckey"), pepper: filepath.Join(dir, "pepper")}
	if err := os.WriteFile(c.pepper, []byte(m.PICfg.Pepper+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// importArgs are the arguments that import the copy c into dataDir.
func (c piCopy) importArgs(dataDir string, extra ...string) []string {
	args := []string{"import", "privacyidea",
		"-db", c.db, "-enckey", c.enckey, "-pepper-file", c.pepper,
		"-relocate", "/tmp/pifix-users.passwd=" + filepath.Join(c.dir, "users.passwd"),
		"-relocate", "/tmp/pifix-hosts=" + filepath.Join(c.dir, "hosts"),
		"-relocate", "/tmp/pifix-ca=" + filepath.Join(c.dir, "ca"),
		"-file-root", c.dir,
		"-data-dir", dataDir,
	}
	return append(args, extra...)
}

var quietEnv = map[string]string{"AUTHSRV_LOG_LEVEL": "disabled"}

// tableRow is a row of the import's table.
type tableRow struct {
	kind, name, result, detail string
}

var (
	cellSep     = regexp.MustCompile(`\s{2,}`)
	importedRe  = regexp.MustCompile(`(?m)^imported (\d+) objects.* into (\S+) \((\d+) not imported\)\s*$`)
	notImported = "not imported"
)

// parseTable reads the table printed by the import: a header
// KIND NAME RESULT DETAIL, then one row per object, then the last line.
func parseTable(t *testing.T, out string) []tableRow {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	start := -1
	for i, l := range lines {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "KIND" && f[1] == "NAME" && f[2] == "RESULT" && f[3] == "DETAIL" {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("no table header KIND NAME RESULT DETAIL in:\n%s", out)
	}
	var rows []tableRow
	for _, l := range lines[start+1:] {
		if strings.TrimSpace(l) == "" || importedRe.MatchString(l) || strings.Contains(l, "nothing was written") {
			continue
		}
		// The result column is "imported" or "not imported"; the kind
		// ("default realm") and the name may hold single spaces.
		cells := cellSep.Split(strings.TrimSpace(l), 4)
		if len(cells) < 3 {
			t.Errorf("table row %q: want KIND NAME RESULT [DETAIL]", l)
			continue
		}
		r := tableRow{kind: cells[0], name: cells[1], result: cells[2]}
		if len(cells) == 4 {
			r.detail = cells[3]
		}
		if r.result != "imported" && r.result != notImported {
			t.Errorf("table row %q: result %q is neither imported nor not imported", l, r.result)
		}
		rows = append(rows, r)
	}
	return rows
}

// checkTable checks the rows against the manifest: a token row per serial,
// imported, and a reason on every row not imported.
func checkTable(t *testing.T, m *piManifest, rows []tableRow) (imported, skipped int) {
	t.Helper()
	tokens := map[string]tableRow{}
	for _, r := range rows {
		if r.result == notImported {
			skipped++
			if r.detail == "" {
				t.Errorf("row %s %q is not imported and gives no reason", r.kind, r.name)
			}
		} else {
			imported++
		}
		if r.kind == "token" {
			if _, dup := tokens[r.name]; dup {
				t.Errorf("token %s has two rows", r.name)
			}
			tokens[r.name] = r
		}
	}
	for _, tok := range m.Tokens {
		r, ok := tokens[tok.Serial]
		switch {
		case !ok:
			t.Errorf("the table has no row for token %s", tok.Serial)
		case r.result != "imported":
			t.Errorf("token %s (%s) was not imported: %s", tok.Serial, tok.Type, r.detail)
		}
	}
	return imported, skipped
}

// checkConfigRows checks that the table has a row (imported, or not with
// its reason) for each named configuration object of the manifest.
func checkConfigRows(t *testing.T, m *piManifest, rows []tableRow) {
	t.Helper()
	want := map[string][]string{
		"realm":         nil,
		"default realm": {m.DefaultRealm},
		"admin":         {m.Install.Admin.Username},
	}
	for kind, objs := range map[string]map[string]map[string]any{
		"resolver": m.Resolvers, "realm": m.Realms, "smtpserver": m.SMTPServers, "radiusserver": m.RadiusServers,
		"machineresolver": m.MachineResolvers, "serviceid": m.ServiceIDs, "caconnector": m.CAConnectors,
	} {
		for name := range objs {
			want[kind] = append(want[kind], name)
		}
	}
	for _, p := range m.Policies {
		want["policy"] = append(want["policy"], p.Name)
	}
	for _, e := range m.EventHandlers {
		want["eventhandler"] = append(want["eventhandler"], e.Name)
	}
	for _, g := range m.SMSGateways {
		if name, ok := g["name"].(string); ok {
			want["smsgateway"] = append(want["smsgateway"], name)
		}
	}
	for kind, list := range want {
		for _, name := range list {
			found := slices.ContainsFunc(rows, func(r tableRow) bool { return r.kind == kind && r.name == name })
			if !found {
				t.Errorf("the table has no row for %s %s", kind, name)
			}
		}
	}
}

// manifestSecrets are the secret values of the manifest that no output may
// show. Values shorter than 6 characters ("1234", "Rex") are left out: they
// would match by chance.
func manifestSecrets(m *piManifest) map[string]string {
	s := map[string]string{
		"PI_PEPPER":            m.PICfg.Pepper,
		"SECRET_KEY":           m.PICfg.SecretKey,
		"enckey":               m.Secrets.EncKeyHex,
		"smtp password":        m.Secrets.SMTPPassword,
		"sms gateway pw":       m.Secrets.SMSPassword,
		"radius secret":        m.Secrets.RadiusSecret,
		"admin password":       m.Install.Admin.Password,
		"the enckey's 1st key": m.Secrets.EncKeyHex[:64],
	}
	for _, g := range m.SMSGateways {
		for k, v := range g {
			if str, ok := v.(string); ok && (strings.Contains(strings.ToLower(k), "password") || strings.Contains(strings.ToLower(k), "key")) {
				s["sms gateway "+k] = str
			}
		}
	}
	for _, tok := range m.Tokens {
		if tok.OTPKeyHex != nil {
			s[tok.Serial+" otpkey"] = *tok.OTPKeyHex
		}
		for name, v := range map[string]string{
			"otpkey text": tok.OTPKeyText, "pin": tok.PIN, "validate pin": tok.ValidatePIN, "password": tok.Password,
			"registration code": tok.RegistrationCode, "secret": tok.Secret, "aes key": tok.AESKeyHex, "private uid": tok.PrivateUIDHex,
		} {
			s[tok.Serial+" "+name] = v
		}
		for q, a := range tok.Questions {
			s[tok.Serial+" answer to "+q] = a
		}
	}
	for k, v := range s {
		if len(v) < 6 {
			delete(s, k)
		}
	}
	return s
}

// checkNoSecrets fails when out shows a secret of the manifest.
func checkNoSecrets(t *testing.T, what, out string, secrets map[string]string) {
	t.Helper()
	low := strings.ToLower(out)
	for name, v := range secrets {
		if strings.Contains(low, strings.ToLower(v)) {
			t.Errorf("%s shows a secret: %s", what, name)
		}
	}
}

// importFixture imports the copy c into dataDir and returns the table's
// rows; the import must succeed.
func importFixture(t *testing.T, m *piManifest, c piCopy, dataDir string) []tableRow {
	t.Helper()
	start := time.Now()
	code, out, errs := cli(t, quietEnv, "", c.importArgs(dataDir)...)
	t.Logf("import took %s", time.Since(start).Round(time.Millisecond))
	checkNoSecrets(t, "the import's output", out+errs, manifestSecrets(m))
	if code != 0 {
		t.Fatalf("import: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	rows := parseTable(t, out)
	imported, skipped := checkTable(t, m, rows)
	checkConfigRows(t, m, rows)
	last := importedRe.FindStringSubmatch(out)
	if last == nil {
		t.Fatalf("no last line \"imported N objects into DIR (M not imported)\" in:\n%s", out)
	}
	abs, _ := filepath.Abs(dataDir)
	if last[2] != abs && last[2] != dataDir {
		t.Errorf("the last line names %s, the data directory is %s", last[2], abs)
	}
	if n, _ := strconv.Atoi(last[1]); n != imported {
		t.Errorf("the last line says %s imported, the table has %d rows imported", last[1], imported)
	}
	if n, _ := strconv.Atoi(last[3]); n != skipped {
		t.Errorf("the last line says %s not imported, the table has %d such rows", last[3], skipped)
	}
	var notes []string
	for _, r := range rows {
		if r.result == notImported {
			notes = append(notes, fmt.Sprintf("%s %s: %s", r.kind, r.name, r.detail))
		}
	}
	t.Logf("%d objects imported, %d not imported:\n  %s", imported, skipped, strings.Join(notes, "\n  "))
	if _, err := os.Stat(filepath.Join(dataDir, "authsrv.db")); err != nil {
		t.Errorf("the imported data directory has no store: %v", err)
	}
	return rows
}

// serveImported starts "authsrv serve" on an imported data directory (in
// this process, on a free loopback port) and returns its address. The
// import created the administrator, so serve prints no password. When the
// test ends, the server's log (at level info, a line per request) must
// show none of secrets.
func serveImported(t *testing.T, dataDir, fileRoot string, secrets map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out, logs syncBuffer
	done := make(chan int, 1)
	env := map[string]string{"AUTHSRV_LOG_LEVEL": "info"}
	go func() {
		done <- run(ctx, []string{"serve", "-data-dir", dataDir, "-listen", "127.0.0.1:0", "-file-root", fileRoot},
			strings.NewReader(""), &out, &logs, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		checkNoSecrets(t, "the server's log", logs.String(), secrets)
	})
	waitFor(t, "serving", func() bool {
		return servingRe.MatchString(out.String()) || strings.Contains(logs.String(), "authsrv serve:")
	})
	if !servingRe.MatchString(out.String()) {
		t.Fatalf("serve did not start on the imported data: %s", logs.String())
	}
	if passwordRe.MatchString(out.String()) {
		t.Error("serve created a new administrator: the imported admin is missing")
	}
	return servingRe.FindStringSubmatch(out.String())[2]
}

// vresult is an answer of the server.
type vresult struct {
	status int
	body   string
	json   map[string]any
}

// jpath returns the value at a dotted path of a decoded JSON document.
func jpath(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (r vresult) accepted() bool {
	return jpath(r.json, "result.value") == true && jpath(r.json, "result.authentication") == "ACCEPT"
}

func (r vresult) String() string { return fmt.Sprintf("HTTP %d %s", r.status, r.body) }

// httpCall sends one request (form-encoded for POST, query for GET).
func httpCall(t *testing.T, method, addr, path, jwt string, v url.Values) vresult {
	t.Helper()
	var req *http.Request
	if method == http.MethodGet {
		req, _ = http.NewRequest(method, "http://"+addr+path+"?"+v.Encode(), nil)
	} else {
		req, _ = http.NewRequest(method, "http://"+addr+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if jwt != "" {
		req.Header.Set("Authorization", jwt)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	r := vresult{status: resp.StatusCode, body: string(b)}
	if err := json.Unmarshal(b, &r.json); err != nil {
		t.Fatalf("%s %s: HTTP %d, not JSON: %s", method, path, resp.StatusCode, b)
	}
	return r
}

// validateCheck is POST /validate/check with the given key/value pairs.
func validateCheck(t *testing.T, addr string, kv ...string) vresult {
	t.Helper()
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return httpCall(t, http.MethodPost, addr, "/validate/check", "", v)
}

// --- OTP generators: everything is computed from the manifest alone ---

func hashFunc(name string) func() hash.Hash {
	switch strings.ToLower(name) {
	case "sha256":
		return sha256.New
	case "sha512":
		return sha512.New
	default:
		return sha1.New
	}
}

// hotpValue is RFC 4226 HOTP of the hex key at counter.
func hotpValue(t *testing.T, keyHex string, counter uint64, digits int, hashName string) string {
	t.Helper()
	key, err := hex.DecodeString(keyHex)
	if err != nil {
		t.Fatalf("otpkey is not hex: %v", err)
	}
	mac := hmac.New(hashFunc(hashName), key)
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	mac.Write(msg[:])
	sum := mac.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	code := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", digits, code%mod)
}

// motpValue is md5(str(int(t/10)) + otpkey_hex + motppin)[:6].
func motpValue(keyHex, pin string, at time.Time) string {
	sum := md5.Sum([]byte(strconv.FormatInt(at.Unix()/10, 10) + keyHex + pin))
	return hex.EncodeToString(sum[:])[:6]
}

// yubicoOTP is the OTP a YubiKey with the AES key keyHex types for y.
func yubicoOTP(t *testing.T, keyHex string, y iotp.YubicoToken) string {
	t.Helper()
	key, err := hex.DecodeString(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	s, err := iotp.EncodeYubico(y, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hashOf(tok piToken) string {
	if tok.Hashlib == nil {
		return "sha1"
	}
	return *tok.Hashlib
}

// passFor computes the pass of a one-step token at now: the PIN to send
// first, then the OTP. ok is false for the types checked otherwise
// (challenge-response, sshkey).
func passFor(t *testing.T, tok piToken, now time.Time) (pass string, ok bool) {
	t.Helper()
	key := ""
	if tok.OTPKeyHex != nil {
		key = *tok.OTPKeyHex
	}
	var otp string
	switch tok.Type {
	case "hotp", "email", "sms":
		if tok.NextOTPCounter == nil {
			t.Fatalf("%s: no next_otp_counter in the manifest", tok.Serial)
		}
		otp = hotpValue(t, key, *tok.NextOTPCounter, tok.OTPLen, hashOf(tok))
	case "totp":
		otp = hotpValue(t, key, uint64(now.Unix()/tok.TimestepSeconds), tok.OTPLen, hashOf(tok))
	case "daypassword":
		step := tok.TimestepSeconds
		if step == 0 {
			step = 86400
		}
		otp = hotpValue(t, key, uint64(now.Unix()/step), tok.OTPLen, hashOf(tok))
	case "motp":
		otp = motpValue(key, tok.MOTPPIN, now)
	case "paper":
		otp = tok.PrintedOTPs[strconv.FormatUint(tok.Counter, 10)]
	case "tan":
		otp = tok.TANs["0"]
	case "pw":
		otp = tok.Password
	case "spass":
		otp = ""
	case "registration":
		otp = tok.RegistrationCode
	case "yubikey":
		uid, err := hex.DecodeString(tok.PrivateUIDHex)
		if err != nil || len(uid) != 6 {
			t.Fatalf("%s: private uid %q", tok.Serial, tok.PrivateUIDHex)
		}
		// The stored counter is usage*256+session of the last OTP; the
		// next OTP's must be higher.
		usage := uint16(tok.Counter>>8) + 1
		otp = yubicoOTP(t, tok.AESKeyHex, iotp.YubicoToken{PublicID: tok.PublicIDModhex, PrivateID: uid, UseCounter: usage, Timestamp: 0x0a1b2c, Random: 0x5a5a})
	default:
		return "", false
	}
	if otp == "" && tok.Type != "spass" {
		t.Fatalf("%s: no OTP from the manifest", tok.Serial)
	}
	return tok.ValidatePIN + otp, true
}

// challengeOf returns the transaction id and the message of a challenge
// answer (of the token serial when there are several).
func challengeOf(r vresult, serial string) (txid, message string, attrs map[string]any) {
	txid, _ = jpath(r.json, "detail.transaction_id").(string)
	message, _ = jpath(r.json, "detail.message").(string)
	if list, ok := jpath(r.json, "detail.multi_challenge").([]any); ok {
		for _, c := range list {
			cm, _ := c.(map[string]any)
			if s, _ := cm["serial"].(string); s != serial && len(list) > 1 {
				continue
			}
			if m, ok := cm["message"].(string); ok && m != "" {
				message = m
			}
			if id, ok := cm["transaction_id"].(string); ok && id != "" {
				txid = id
			}
			attrs, _ = cm["attributes"].(map[string]any)
		}
	}
	return txid, message, attrs
}

var positionsRe = regexp.MustCompile(`(\d+(?:\s*,\s*\d+)*)`)

// challengeAnswer computes the answer to the challenge of an indexedsecret
// or question token.
func challengeAnswer(t *testing.T, tok piToken, message string, attrs map[string]any) string {
	t.Helper()
	switch tok.Type {
	case "question":
		a, ok := tok.Questions[message]
		if !ok {
			t.Fatalf("%s: the challenge %q is none of the manifest's questions", tok.Serial, message)
		}
		return a
	case "indexedsecret":
		var pos []int
		if list, ok := attrs["random_positions"].([]any); ok {
			for _, p := range list {
				if f, ok := p.(float64); ok {
					pos = append(pos, int(f))
				}
			}
		}
		if len(pos) == 0 {
			m := positionsRe.FindString(message)
			for _, s := range strings.Split(m, ",") {
				if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
					pos = append(pos, n)
				}
			}
		}
		if len(pos) == 0 {
			t.Fatalf("%s: no positions in the challenge %q", tok.Serial, message)
		}
		var sb strings.Builder
		for _, p := range pos {
			if p < 1 || p > len(tok.Secret) {
				t.Fatalf("%s: position %d outside the secret's %d characters", tok.Serial, p, len(tok.Secret))
			}
			sb.WriteByte(tok.Secret[p-1])
		}
		return sb.String()
	}
	t.Fatalf("%s: no challenge answer for type %s", tok.Serial, tok.Type)
	return ""
}

// expectation is what privacyIDEA answered for the token in the manifest's
// verification: "ACCEPT", "REJECT", or "" (sshkey: served by authitem).
func expectation(t *testing.T, m *piManifest, serial string) string {
	t.Helper()
	for _, v := range m.Verification.Results {
		if v.Serial == serial {
			if !v.OK {
				t.Fatalf("%s: the manifest's own verification failed", serial)
			}
			if v.Expected == "ACCEPT" || v.Expected == "REJECT" {
				return v.Expected
			}
			return ""
		}
	}
	t.Fatalf("%s: not in the manifest's verification", serial)
	return ""
}

// checkSSHKey fetches the SSH key of tok through GET /machine/authitem/ssh
// with each request of the manifest's verification.
func checkSSHKey(t *testing.T, m *piManifest, addr, jwt string, tok piToken) {
	t.Helper()
	ver := verificationOf(m, tok.Serial)
	if ver == nil || len(ver.Authitem) == 0 {
		t.Fatalf("%s: the manifest has no authitem verification", tok.Serial)
	}
	for _, item := range ver.Authitem {
		v := url.Values{}
		for k, val := range item.Params {
			v.Set(k, val)
		}
		r := httpCall(t, http.MethodGet, addr, "/machine/authitem/ssh", jwt, v)
		list, _ := jpath(r.json, "result.value.ssh").([]any)
		for _, want := range item.SSH {
			found := false
			for _, got := range list {
				g, _ := got.(map[string]any)
				if g["sshkey"] == tok.SSHKey && g["user"] == want["user"] {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: GET /machine/authitem/ssh %v does not serve the key for user %v: %s", tok.Serial, item.Params, want["user"], r)
			}
		}
	}
	// Not an OTP token: the PIN alone does not log in.
	if r := validateCheck(t, addr, "serial", tok.Serial, "pass", tok.ValidatePIN); r.accepted() {
		t.Errorf("%s: /validate/check with the PIN accepted an sshkey token: %s", tok.Serial, r)
	}
}

// checkTokens logs each token of the manifest (all when serials is empty)
// in over HTTP and compares with what privacyIDEA answered. Checks run one
// after another: each PIN is an Argon2 hash of 100 MiB.
func checkTokens(t *testing.T, m *piManifest, addr, jwt string, serials ...string) {
	t.Helper()
	for _, tok := range m.Tokens {
		if len(serials) > 0 && !slices.Contains(serials, tok.Serial) {
			continue
		}
		want := expectation(t, m, tok.Serial)
		switch tok.Type {
		case "sshkey":
			checkSSHKey(t, m, addr, jwt, tok)
			continue
		case "indexedsecret", "question":
			r := validateCheck(t, addr, "serial", tok.Serial, "pass", tok.ValidatePIN)
			txid, msg, attrs := challengeOf(r, tok.Serial)
			if jpath(r.json, "result.authentication") != "CHALLENGE" || txid == "" {
				t.Errorf("%s (%s): the PIN gave no challenge: %s", tok.Serial, tok.Type, r)
				continue
			}
			answer := challengeAnswer(t, tok, msg, attrs)
			r = validateCheck(t, addr, "serial", tok.Serial, "transaction_id", txid, "pass", answer)
			if got := r.accepted(); got != (want == "ACCEPT") {
				t.Errorf("%s (%s): the answer to %q: %s; privacyIDEA: %s", tok.Serial, tok.Type, msg, r, want)
			}
			continue
		}
		pass, ok := passFor(t, tok, time.Now())
		if !ok {
			t.Errorf("%s: type %s is not covered by this test", tok.Serial, tok.Type)
			continue
		}
		r := validateCheck(t, addr, "serial", tok.Serial, "pass", pass)
		if got := r.accepted(); got != (want == "ACCEPT") {
			t.Errorf("%s (%s, %s): %s; privacyIDEA: %s", tok.Serial, tok.Type, tok.State, r, want)
		}
		if want != "ACCEPT" || !r.accepted() {
			continue
		}
		if v := verificationOf(m, tok.Serial); v != nil {
			for _, item := range v.AuthItemsReturned {
				if jpath(r.json, "auth_items."+item) == nil {
					t.Errorf("%s: the answer has no auth_items.%s as privacyIDEA's had: %s", tok.Serial, item, r)
				}
			}
		}
		// What privacyIDEA would refuse afterwards.
		switch tok.Type {
		case "hotp":
			if tok.Serial == "FX-HOTP8-BOB" {
				if r := validateCheck(t, addr, "serial", tok.Serial, "pass", pass); r.accepted() {
					t.Errorf("%s: the replayed HOTP was accepted again: %s", tok.Serial, r)
				}
			}
		case "registration":
			if r := validateCheck(t, addr, "serial", tok.Serial, "pass", pass); r.accepted() {
				t.Errorf("%s: the registration code was accepted twice: %s", tok.Serial, r)
			}
		}
	}
}

// verificationOf returns the manifest's first verification of serial.
func verificationOf(m *piManifest, serial string) *piVerification {
	for i := range m.Verification.Results {
		if m.Verification.Results[i].Serial == serial {
			return &m.Verification.Results[i]
		}
	}
	return nil
}

// checkTokenRecords compares each imported token, as GET /token/ shows
// it, with the manifest: type, description, state, counters, owner, token
// realms and the token info an administrator had set.
func checkTokenRecords(t *testing.T, m *piManifest, addr, jwt string) {
	t.Helper()
	for _, tok := range m.Tokens {
		r := httpCall(t, http.MethodGet, addr, "/token/", jwt, url.Values{"serial": {tok.Serial}})
		list, _ := jpath(r.json, "result.value.tokens").([]any)
		if len(list) != 1 {
			t.Errorf("GET /token/?serial=%s: %s", tok.Serial, r)
			continue
		}
		got, _ := list[0].(map[string]any)
		var diffs []string
		same := func(field string, want any) {
			g := got[field]
			if f, ok := g.(float64); ok {
				g = int(f)
			}
			if fmt.Sprint(g) != fmt.Sprint(want) {
				diffs = append(diffs, fmt.Sprintf("%s %v, privacyIDEA %v", field, got[field], want))
			}
		}
		same("tokentype", tok.Type)
		same("description", tok.Description)
		same("active", tok.Active)
		same("revoked", tok.Revoked)
		same("failcount", tok.FailCount)
		same("maxfail", tok.MaxFail)
		same("count", int(tok.Counter))
		user, realm := "", ""
		if tok.User != nil {
			user, realm = *tok.User, *tok.UserRealm
		}
		same("username", user)
		same("user_realm", realm)
		var realms []string
		if l, ok := got["realms"].([]any); ok {
			for _, x := range l {
				realms = append(realms, fmt.Sprint(x))
			}
		}
		slices.Sort(realms)
		wantRealms := slices.Sorted(slices.Values(tok.TokenRealms))
		if !slices.Equal(realms, wantRealms) {
			diffs = append(diffs, fmt.Sprintf("realms %v, privacyIDEA %v", realms, wantRealms))
		}
		info, _ := got["info"].(map[string]any)
		for k, v := range tok.InfoSetViaAPI {
			if fmt.Sprint(info[k]) != v {
				diffs = append(diffs, fmt.Sprintf("info %s %v, privacyIDEA %q", k, info[k], v))
			}
		}
		if len(diffs) > 0 {
			t.Errorf("token %s (%s) as imported: %s", tok.Serial, tok.Type, strings.Join(diffs, "; "))
		}
	}
}

// tokenBySerial returns the manifest's token serial.
func tokenBySerial(t *testing.T, m *piManifest, serial string) piToken {
	t.Helper()
	for _, tok := range m.Tokens {
		if tok.Serial == serial {
			return tok
		}
	}
	t.Fatalf("%s is not in the manifest", serial)
	return piToken{}
}

// TestImportOTPHelpers checks this file's OTP generators against what the
// manifest says privacyIDEA accepted, so that a failing login below is the
// import's fault and not the test's.
func TestImportOTPHelpers(t *testing.T) {
	m := loadPIManifest(t, piFixtureDir(t))
	when, err := time.Parse(time.RFC3339, m.Verification.When)
	if err != nil {
		t.Fatalf("verification.when_utc: %v", err)
	}
	hotpCounter := regexp.MustCompile(`HOTP\(otpkey, counter=(\d+)`)
	checked := 0
	for _, v := range m.Verification.Results {
		if v.PassSent == "" {
			continue
		}
		tok := tokenBySerial(t, m, v.Serial)
		pin := tok.ValidatePIN
		if !strings.HasPrefix(v.PassSent, pin) {
			t.Errorf("%s: pass_sent does not start with validate_pin", v.Serial)
			continue
		}
		sent := strings.TrimPrefix(v.PassSent, pin)
		switch {
		case hotpCounter.MatchString(v.How):
			n, _ := strconv.ParseUint(hotpCounter.FindStringSubmatch(v.How)[1], 10, 64)
			if got := hotpValue(t, *tok.OTPKeyHex, n, tok.OTPLen, hashOf(tok)); got != sent {
				t.Errorf("%s: HOTP at %d = %s, privacyIDEA accepted %s", v.Serial, n, got, sent)
			}
			if tok.NextOTPCounter != nil && *tok.NextOTPCounter != n {
				t.Errorf("%s: next_otp_counter %d, verified at %d", v.Serial, *tok.NextOTPCounter, n)
			}
		case tok.Type == "totp" || tok.Type == "motp" || tok.Type == "daypassword":
			// The check ran within a few minutes before when_utc.
			found := false
			for s := int64(-600); s <= 60 && !found; s++ {
				at := when.Add(time.Duration(s) * time.Second)
				pass, _ := passFor(t, tok, at)
				found = pass == v.PassSent
			}
			if !found {
				t.Errorf("%s: no %s value near %s matches what privacyIDEA accepted", v.Serial, tok.Type, when)
			}
		case tok.Type == "yubikey":
			key, _ := hex.DecodeString(tok.AESKeyHex)
			y, err := iotp.ParseYubico(sent, key)
			if err != nil || !strings.HasPrefix(sent, tok.PublicIDModhex) || hex.EncodeToString(y.PrivateID) != tok.PrivateUIDHex {
				t.Errorf("%s: the accepted OTP does not decrypt to the private uid (%v)", v.Serial, err)
				break
			}
			// Encoding the same fields again gives the same OTP.
			if got := yubicoOTP(t, tok.AESKeyHex, y); got != sent {
				t.Errorf("%s: rebuilt %s, privacyIDEA accepted %s", v.Serial, got, sent)
			}
		default:
			pass, ok := passFor(t, tok, when)
			if !ok || pass != v.PassSent {
				t.Errorf("%s (%s): computed a pass other than the one privacyIDEA accepted", v.Serial, tok.Type)
			}
		}
		checked++
	}
	if checked < 18 {
		t.Errorf("only %d verification results checked", checked)
	}
}

// TestImportPrivacyIDEA imports the real privacyIDEA 3.10.2 database and
// logs every token in over HTTP on the imported data, with its PIN as the
// user set it in privacyIDEA.
func TestImportPrivacyIDEA(t *testing.T) {
	fixture := piFixtureDir(t)
	m := loadPIManifest(t, fixture)
	c := copyPIFixture(t, fixture, m)
	dataDir := shortDir(t)
	importFixture(t, m, c, dataDir)

	addr := serveImported(t, dataDir, c.dir, manifestSecrets(m))
	// The imported local admin logs in with the password set in
	// privacyIDEA: the pepper was brought over.
	code, body := login(t, addr, m.Install.Admin.Password)
	var auth struct {
		Result struct {
			Value struct {
				Token string `json:"token"`
			} `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &auth); code != http.StatusOK || err != nil || auth.Result.Value.Token == "" {
		t.Fatalf("the imported admin %s does not log in: %d %s", m.Install.Admin.Username, code, body)
	}
	jwt := auth.Result.Value.Token

	checkTokenRecords(t, m, addr, jwt)

	// The counter came over: an OTP below it is refused.
	alice := tokenBySerial(t, m, "FX-HOTP6-ALICE")
	if *alice.NextOTPCounter == 0 {
		t.Fatal("FX-HOTP6-ALICE was expected to have been used in privacyIDEA")
	}
	used := *alice.NextOTPCounter - 1
	if r := validateCheck(t, addr, "serial", alice.Serial, "pass", alice.ValidatePIN+hotpValue(t, *alice.OTPKeyHex, used, alice.OTPLen, hashOf(alice))); r.accepted() {
		t.Errorf("%s: the HOTP at counter %d, used in privacyIDEA, was accepted: %s", alice.Serial, used, r)
	}

	start := time.Now()
	checkTokens(t, m, addr, jwt)

	// A user-based check: alice's HOTP, at the counter after the one the
	// serial check used.
	next := *alice.NextOTPCounter + 1
	pass := alice.ValidatePIN + hotpValue(t, *alice.OTPKeyHex, next, alice.OTPLen, hashOf(alice))
	if r := validateCheck(t, addr, "user", *alice.User, "realm", *alice.UserRealm, "pass", pass); !r.accepted() {
		t.Errorf("user alice@corp with the HOTP at %d: %s", next, r)
	}
	if r := validateCheck(t, addr, "user", *alice.User, "realm", *alice.UserRealm, "pass", pass); r.accepted() {
		t.Errorf("user alice@corp: the replayed HOTP was accepted: %s", r)
	}
	t.Logf("the logins took %s", time.Since(start).Round(time.Millisecond))
}

// dirState lists the files of dir with their size and modification time.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// absentOrEmpty fails unless dir does not exist or is empty.
func absentOrEmpty(t *testing.T, what, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) > 0 {
		t.Errorf("%s: the data directory holds %v", what, names)
	}
}

// noStrays fails when the import left something beside the data
// directory (its temporary store).
func noStrays(t *testing.T, what, dataDir string, before []string) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Dir(dataDir))
	for _, e := range entries {
		if !slices.Contains(before, e.Name()) && e.Name() != filepath.Base(dataDir) {
			t.Errorf("%s: left %s beside the data directory", what, e.Name())
		}
	}
}

func names(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestImportPrivacyIDEARefusals: what is refused is refused with a clear
// message, and leaves nothing half-imported.
func TestImportPrivacyIDEARefusals(t *testing.T) {
	fixture := piFixtureDir(t)
	m := loadPIManifest(t, fixture)
	c := copyPIFixture(t, fixture, m)
	secrets := manifestSecrets(m)

	t.Run("a second import into the same directory", func(t *testing.T) {
		dataDir := shortDir(t)
		if code, out, errs := cli(t, quietEnv, "", c.importArgs(dataDir)...); code != 0 {
			t.Fatalf("first import: %d\n%s\n%s", code, out, errs)
		}
		before := dirState(t, dataDir)
		code, out, errs := cli(t, quietEnv, "", c.importArgs(dataDir)...)
		if code == 0 || !strings.Contains(errs, "not empty") {
			t.Errorf("second import: exit %d, stderr %q; want a refusal saying \"not empty\"", code, errs)
		}
		checkNoSecrets(t, "the refusal", out+errs, secrets)
		if after := dirState(t, dataDir); !maps.Equal(before, after) {
			t.Errorf("the refused import changed the data directory:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("a dry run", func(t *testing.T) {
		dataDir := shortDir(t)
		parent := names(filepath.Dir(dataDir))
		code, out, errs := cli(t, quietEnv, "", c.importArgs(dataDir, "-dry-run")...)
		if code != 0 {
			t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
		}
		checkNoSecrets(t, "the dry run's output", out+errs, secrets)
		rows := parseTable(t, out)
		checkTable(t, m, rows)
		if !strings.Contains(out, "dry run") || !strings.Contains(out, "nothing was written") {
			t.Errorf("the dry run does not say that nothing was written:\n%s", out)
		}
		if importedRe.MatchString(out) {
			t.Errorf("the dry run claims an import:\n%s", out)
		}
		absentOrEmpty(t, "dry run", dataDir)
		noStrays(t, "dry run", dataDir, parent)

		// Into an empty directory, too.
		if err := os.Mkdir(dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := cli(t, quietEnv, "", c.importArgs(dataDir, "-dry-run")...); code != 0 || !strings.Contains(out, "nothing was written") {
			t.Errorf("dry run into an empty directory: exit %d\n%s\n%s", code, out, errs)
		}
		absentOrEmpty(t, "dry run into an empty directory", dataDir)
	})

	t.Run("pi.cfg gives the database, the encKey and the pepper", func(t *testing.T) {
		cfg, err := os.ReadFile(filepath.Join(c.dir, "pi.cfg"))
		if err != nil {
			t.Fatal(err)
		}
		cfgFile := filepath.Join(c.dir, "pi-relocated.cfg")
		if err := os.WriteFile(cfgFile, bytes.ReplaceAll(cfg, []byte("/tmp/pifix/run"), []byte(c.dir)), 0o600); err != nil {
			t.Fatal(err)
		}
		dataDir := shortDir(t)
		args := []string{"import", "privacyidea", "-pi-config", cfgFile, "-dry-run", "-data-dir", dataDir, "-file-root", c.dir}
		for _, old := range []string{"/tmp/pifix-users.passwd", "/tmp/pifix-hosts", "/tmp/pifix-ca"} {
			args = append(args, "-relocate", old+"="+filepath.Join(c.dir, strings.TrimPrefix(old, "/tmp/pifix-")))
		}
		code, out, errs := cli(t, quietEnv, "", args...)
		checkNoSecrets(t, "the output", out+errs, secrets)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		rows := parseTable(t, out)
		checkTable(t, m, rows)
		if !slices.ContainsFunc(rows, func(r tableRow) bool {
			return r.kind == "admin" && r.name == m.Install.Admin.Username && r.result == "imported"
		}) {
			t.Errorf("the admin was not imported with the pepper of pi.cfg:\n%s", out)
		}
		absentOrEmpty(t, "dry run", dataDir)
	})

	t.Run("a wrong encKey", func(t *testing.T) {
		good, err := os.ReadFile(c.enckey)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			at   int
		}{{"token key", 5}, {"config key", 40}} {
			t.Run(tc.name, func(t *testing.T) {
				bad := slices.Clone(good)
				bad[tc.at] ^= 0x01
				keyFile := filepath.Join(t.TempDir(), "enckey")
				if err := os.WriteFile(keyFile, bad, 0o600); err != nil {
					t.Fatal(err)
				}
				dataDir := shortDir(t)
				parent := names(filepath.Dir(dataDir))
				args := c.importArgs(dataDir)
				args[slices.Index(args, "-enckey")+1] = keyFile
				code, out, errs := cli(t, quietEnv, "", args...)
				if code == 0 || !strings.Contains(errs, "encKey") {
					t.Errorf("exit %d, stderr %q; want a refusal naming the encKey", code, errs)
				}
				checkNoSecrets(t, "the refusal", out+errs, secrets)
				if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
					t.Errorf("the refused import created the data directory: %v", err)
				}
				noStrays(t, "wrong encKey", dataDir, parent)
			})
		}
		t.Run("too short", func(t *testing.T) {
			keyFile := filepath.Join(t.TempDir(), "enckey")
			if err := os.WriteFile(keyFile, good[:32], 0o600); err != nil {
				t.Fatal(err)
			}
			dataDir := shortDir(t)
			args := c.importArgs(dataDir)
			args[slices.Index(args, "-enckey")+1] = keyFile
			if code, _, errs := cli(t, quietEnv, "", args...); code == 0 || !strings.Contains(errs, "encKey") {
				t.Errorf("exit %d, stderr %q", code, errs)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("the refused import created the data directory: %v", err)
			}
		})
	})

	t.Run("an unsupported privacyIDEA version", func(t *testing.T) {
		const revision = "0123456789ab"
		db := filepath.Join(t.TempDir(), "pi.sqlite")
		b, err := os.ReadFile(c.db)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(db, b, 0o600); err != nil {
			t.Fatal(err)
		}
		sdb, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sdb.ExecContext(t.Context(), "UPDATE alembic_version SET version_num = ?", revision)
		if err == nil {
			if n, _ := res.RowsAffected(); n != 1 {
				err = fmt.Errorf("%d rows changed", n)
			}
		}
		_ = sdb.Close()
		if err != nil {
			t.Fatalf("changing the revision: %v", err)
		}
		dataDir := shortDir(t)
		args := c.importArgs(dataDir)
		args[slices.Index(args, "-db")+1] = db
		code, out, errs := cli(t, quietEnv, "", args...)
		if code == 0 || !strings.Contains(errs, revision) || !strings.Contains(errs, "3.10.2") {
			t.Errorf("exit %d, stderr %q; want a refusal naming the revision %s and the supported 3.10.2", code, errs, revision)
		}
		checkNoSecrets(t, "the refusal", out+errs, secrets)
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Errorf("the refused import created the data directory: %v", err)
		}
	})

	t.Run("the data directory of a running server", func(t *testing.T) {
		dataDir := shortDir(t)
		serveInProcess(t, map[string]string{"AUTHSRV_DATA_DIR": dataDir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"})
		before := dirState(t, dataDir)
		delete(before, "authsrv.db") // the running server writes to its store
		code, out, errs := cli(t, quietEnv, "", c.importArgs(dataDir)...)
		if code == 0 || !strings.Contains(errs, "in use by a running server") {
			t.Errorf("exit %d, stderr %q; want \"in use by a running server\"", code, errs)
		}
		checkNoSecrets(t, "the refusal", out+errs, secrets)
		after := dirState(t, dataDir)
		delete(after, "authsrv.db")
		for k := range after {
			if _, ok := before[k]; !ok && !strings.HasPrefix(k, "control") {
				t.Errorf("the refused import added %s to the running server's directory", k)
			}
		}
	})
}

// TestImportPrivacyIDEAPostgres imports the fixture from PostgreSQL (the
// same rows, loaded into a real server) and logs in with a handful of
// tokens.
func TestImportPrivacyIDEAPostgres(t *testing.T) {
	fixture := piFixtureDir(t)
	m := loadPIManifest(t, fixture)
	c := copyPIFixture(t, fixture, m)
	pg := testsvc.Postgres(t)
	dbURL := testsvc.LoadPrivacyIDEAFixture(t, pg, c.db)
	if !strings.HasPrefix(dbURL, "postgresql://") {
		t.Errorf("LoadPrivacyIDEAFixture returned %q; want a postgresql:// URL as privacyIDEA's pi.cfg has it", redactURL(dbURL))
	}
	// The SQLite copy is removed so that only PostgreSQL can be read.
	if err := os.Remove(c.db); err != nil {
		t.Fatal(err)
	}
	dataDir := shortDir(t)
	args := c.importArgs(dataDir)
	args[slices.Index(args, "-db")+1] = dbURL
	code, out, errs := cli(t, quietEnv, "", args...)
	secrets := manifestSecrets(m)
	secrets["the PostgreSQL password"] = pg.Password
	checkNoSecrets(t, "the import's output", out+errs, secrets)
	if code != 0 {
		t.Fatalf("import from PostgreSQL: exit %d\n%s\n%s", code, out, errs)
	}
	checkTable(t, m, parseTable(t, out))

	addr := serveImported(t, dataDir, c.dir, secrets)
	jwt := adminToken(t, addr, m.Install.Admin.Password)
	checkTokens(t, m, addr, jwt, "FX-HOTP6-ALICE", "FX-TOTP30-CAROL", "FX-PW-GRACE", "FX-QUEST-ALICE",
		"FX-YUBIKEY-ERIN", "FX-HOTP-LOCKED", "FX-SSHKEY-DAVE")
}

// redactURL hides the password of a database URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
