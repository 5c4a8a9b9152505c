package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
)

// readmeBlock is one fenced block of a README section.
type readmeBlock struct {
	info string // the fence's info string: "sh" for the blocks the test runs
	text string
}

// readmeSection returns the fenced blocks of the README section headed
// "## "+heading, in order.
func readmeSection(t *testing.T, heading string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []readmeBlock
		in      bool // inside the section
		found   bool
		fence   bool // inside a fenced block
		cur     readmeBlock
		content strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case fence && strings.HasPrefix(line, "```"):
			fence = false
			cur.text = content.String()
			blocks = append(blocks, cur)
		case fence:
			content.WriteString(line + "\n")
		case strings.HasPrefix(line, "## "):
			in = line == "## "+heading
			found = found || in
		case in && strings.HasPrefix(line, "```"):
			fence = true
			cur = readmeBlock{info: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			content.Reset()
		}
	}
	if !found {
		t.Fatalf("README.md has no section %q", heading)
	}
	if fence {
		t.Fatalf("README.md: a fenced block in %q is not closed", heading)
	}
	return blocks
}

// readmeVar replaces the one line of script that defines the shell
// variable name (at the start of a line, as the README's walkthrough
// defines it) with name=value, and returns the documented value.
func readmeVar(t *testing.T, script *string, name, value string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + name + `=(\S+)(.*)$`)
	m := re.FindAllStringSubmatch(*script, -1)
	if len(m) != 1 {
		t.Fatalf("the walkthrough must define %s once at the start of a line, found %d", name, len(m))
	}
	*script = re.ReplaceAllLiteralString(*script, name+"="+value)
	return m[0][1]
}

// TestREADMEFirstLogin runs the README's "First login" walkthrough as a
// new user would: the server started with the documented flags in a fresh
// directory, a mail sink at the documented address (its port substituted),
// the sh blocks run by bash in order, the admin password typed when the
// walkthrough reads it, and the code from the mail typed when it asks for
// it. The OTP login and the answer to the e-mail challenge must succeed.
func TestREADMEFirstLogin(t *testing.T) {
	bash := testsvc.Require(t, "bash")
	testsvc.Require(t, "curl")
	blocks := readmeSection(t, "First login")

	// The commands for the other terminals: the server and the sink.
	var serverArgs []string
	var sinkCmd string
	var scripts []string
	for _, b := range blocks {
		switch {
		case b.info == "sh":
			scripts = append(scripts, b.text)
		case strings.HasPrefix(b.text, "go run ./cmd/authsrv"):
			if serverArgs != nil {
				t.Fatal("two server commands in the walkthrough")
			}
			serverArgs = strings.Fields(strings.TrimPrefix(strings.TrimSpace(b.text), "go run ./cmd/authsrv"))
			if serverArgs == nil {
				serverArgs = []string{}
			}
		case strings.Contains(b.text, "aiosmtpd"):
			sinkCmd = b.text
		}
	}
	if serverArgs == nil || sinkCmd == "" || len(scripts) < 5 {
		t.Fatalf("the walkthrough lost its server command, its mail sink or its sh blocks: %d sh blocks", len(scripts))
	}

	// A shell script of the sh blocks, each announced by a marker line so
	// that every block's output can be told apart.
	var sb strings.Builder
	for i, s := range scripts {
		fmt.Fprintf(&sb, "echo '@@ block %d'\n%s", i, s)
	}
	script := sb.String()

	sink := testsvc.NewSMTPSink(t)
	docPort := readmeVar(t, &script, "MAILPORT", strconv.Itoa(sink.Port))
	if !strings.Contains(sinkCmd, "127.0.0.1:"+docPort) {
		t.Errorf("the sink command %q does not listen on the walkthrough's MAILPORT %s", sinkCmd, docPort)
	}

	// The server, in a fresh directory that is also the walkthrough's
	// working directory (its data in ./authsrv-data there, as with go run
	// in a checkout), on a free loopback port.
	work, err := os.MkdirTemp("", "asreadme") // a short path for the control socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTHSRV_") {
			env = append(env, kv)
		}
	}
	srv := exec.Command(os.Args[0])
	srv.Dir = work
	srv.Env = append(env,
		"AUTHSRV_TEST_MAIN_ARGS="+strings.Join(append([]string{"serve"}, serverArgs...), "\x1f"),
		"AUTHSRV_LISTEN=127.0.0.1:0",
		"AUTHSRV_DATA_DIR="+filepath.Join(work, "authsrv-data"))
	var srvOut, srvErr syncBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", srvErr.String())
		}
	})
	waitFor(t, "the server", func() bool { return servingRe.MatchString(srvOut.String()) })
	addr := servingRe.FindStringSubmatch(srvOut.String())[2]
	pm := passwordRe.FindStringSubmatch(srvOut.String())
	if pm == nil {
		t.Fatalf("the first start printed no password: %q", srvOut.String())
	}
	password := pm[1]
	if doc := readmeVar(t, &script, "AUTHSRV", "http://"+addr); doc != "http://127.0.0.1:8080" {
		t.Errorf("AUTHSRV is %s in the walkthrough, the server's default is http://127.0.0.1:8080", doc)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The script is a file, so that standard input is left for the reads
	// of the password and of the mail's code.
	scriptFile := filepath.Join(work, "walkthrough.sh")
	if err := os.WriteFile(scriptFile, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	sh := exec.CommandContext(ctx, bash, "-e", "-o", "pipefail", scriptFile)
	sh.Dir = work
	sh.Env = env
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errs syncBuffer
	sh.Stdout, sh.Stderr = &out, &errs
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()

	// The new user pastes the printed password...
	// (A write fails only when bash has already exited; its output below
	// then says why.)
	_, _ = io.WriteString(stdin, password+"\n")
	// ... and types the code from the mail once it has arrived. No mail
	// (the server could not send it) closes standard input, so that the
	// walkthrough's read fails instead of waiting.
	var mail testsvc.Mail
	var shErr error
	exited := false
	mailDeadline := time.Now().Add(30 * time.Second)
wait:
	for {
		if msgs := sink.Messages(); len(msgs) > 0 {
			mail = msgs[0]
			break
		}
		if time.Now().After(mailDeadline) || strings.Contains(out.String(), "could not be sent") {
			t.Error("no mail arrived at the sink")
			_ = stdin.Close()
			shErr, exited = <-done, true
			break
		}
		select {
		case shErr = <-done:
			exited = true
			break wait
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !exited {
		code := regexp.MustCompile(`\r?\n\r?\n\s*(\d{6,8})\s*$`).FindStringSubmatch(mail.Data)
		if code == nil {
			t.Errorf("no code in the mail: %q", mail.Data)
		} else {
			_, _ = io.WriteString(stdin, code[1]+"\n")
		}
		_ = stdin.Close()
		shErr = <-done
	}
	output := out.String()
	if shErr != nil {
		t.Fatalf("the walkthrough failed: %v\nstdout:\n%s\nstderr:\n%s", shErr, output, errs.String())
	}
	if strings.Contains(output, password) || strings.Contains(errs.String(), password) {
		t.Error("the walkthrough printed the admin password")
	}
	if strings.Contains(output, `"status":false`) {
		t.Errorf("a call of the walkthrough failed:\n%s", output)
	}

	// Each block's output, found by what the block does.
	parts := regexp.MustCompile(`(?m)^@@ block \d+\n`).Split(output, -1)[1:]
	if len(parts) != len(scripts) {
		t.Fatalf("%d outputs for %d blocks:\n%s", len(parts), len(scripts), output)
	}
	outputOf := func(what string) string {
		t.Helper()
		for i, s := range scripts {
			if strings.Contains(s, what) {
				return parts[i]
			}
		}
		t.Fatalf("no block of the walkthrough has %q", what)
		return ""
	}
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		return lines[len(lines)-1]
	}

	// The QR code is a PNG and the otpauth URL carries the RFC 4226 key.
	enroll := outputOf("alice-hotp.png")
	if !strings.Contains(enroll, "otpauth://hotp/") || !strings.Contains(enroll, "secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&") {
		t.Errorf("the enrollment printed no otpauth URL with the key:\n%s", enroll)
	}
	f, err := os.Open(filepath.Join(work, "alice-hotp.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	_ = f.Close()
	if err != nil || img.Bounds().Dx() < 100 {
		t.Errorf("alice-hotp.png is not a QR code image: %v", err)
	}

	// PIN + OTP logs alice in.
	if check := outputOf("pass=1234755224"); !strings.Contains(lastLine(check), `"authentication":"ACCEPT","value":true`) {
		t.Errorf("the OTP check was not accepted:\n%s", check)
	}

	// The PIN alone sent the mail, and its code answered the challenge.
	if len(mail.To) != 1 || mail.To[0] != "alice@example.org" {
		t.Errorf("the challenge mail went to %v", mail.To)
	}
	challenge := outputOf("transaction_id=")
	if !strings.Contains(challenge, `"authentication":"CHALLENGE"`) || !strings.Contains(challenge, `"transaction_id":"`) {
		t.Errorf("the PIN started no e-mail challenge:\n%s", challenge)
	}
	if !strings.Contains(lastLine(challenge), `"authentication":"ACCEPT","value":true`) {
		t.Errorf("the answer to the e-mail challenge was not accepted:\n%s", challenge)
	}
}
