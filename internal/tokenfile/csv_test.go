package tokenfile_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/tokenfile"
)

const rfcSeedHex = "3132333435363738393031323334353637383930"

func parseOATH(t *testing.T, in string) ([]tokenfile.Record, []tokenfile.Failure) {
	t.Helper()
	recs, fails, err := tokenfile.ParseOATHCSV(strings.NewReader(in), tokenfile.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	noSecrets(t, recs, fails, err, rfcSeed, []byte("deadbeefdeadbeef"))
	return recs, fails
}

func TestParseOATHCSV(t *testing.T) {
	in := "\xef\xbb\xbf# exported tokens\n" +
		"Serial, Key, Type, OTPLen, TimeStep\n" +
		"\n" +
		"   \n" +
		"  # indented comment\n" +
		"hotp1, " + rfcSeedHex + "\n" +
		"hotp2," + strings.ToUpper(rfcSeedHex) + ",HOTP,8,99\n" +
		"totp1 ,\t" + rfcSeedHex + " , totp\n" +
		"totp2," + rfcSeedHex + ",totp,8,60,alice,realm1\n" +
		"hotp3," + rfcSeedHex + ",,,,bob\n" +
		`"quoted",` + rfcSeedHex + "\n"
	recs, fails := parseOATH(t, in)
	if len(fails) != 0 {
		t.Fatalf("failures: %+v", fails)
	}
	want := []tokenfile.Record{
		{Serial: "hotp1", Type: "hotp", OTPLen: 6},
		{Serial: "hotp2", Type: "hotp", OTPLen: 8},
		{Serial: "totp1", Type: "totp", OTPLen: 6, TimeStep: 30},
		{Serial: "totp2", Type: "totp", OTPLen: 8, TimeStep: 60, User: "alice", Realm: "realm1"},
		{Serial: "hotp3", Type: "hotp", OTPLen: 6, User: "bob"},
		{Serial: "quoted", Type: "hotp", OTPLen: 6},
	}
	if len(recs) != len(want) {
		t.Fatalf("records = %v", recs)
	}
	for i, w := range want {
		t.Run(w.Serial, func(t *testing.T) {
			r := recs[i]
			if !bytes.Equal(r.Key, rfcSeed) {
				t.Errorf("key = %x", r.Key)
			}
			r.Key = nil
			if fmt.Sprint(r) != fmt.Sprint(w) || r.Info != nil || r.HashLib != "" || r.Counter != 0 {
				t.Errorf("record = %v, want %v", r, w)
			}
		})
	}
}

func TestParseOATHCSVFailures(t *testing.T) {
	in := strings.Join([]string{
		"good," + rfcSeedHex,                          // 1
		"nothex,deadbeefdeadbeefzz",                   // 2
		"oddhex,123",                                  // 3
		"nokey,",                                      // 4
		"badlen," + rfcSeedHex + ",hotp,7",            // 5
		"textlen," + rfcSeedHex + ",hotp,six",         // 6
		"badtype," + rfcSeedHex + ",motp",             // 7
		"badstep," + rfcSeedHex + ",totp,6,45",        // 8
		"good," + rfcSeedHex,                          // 9: duplicate
		"bad serial," + rfcSeedHex,                    // 10
		"bad/serial," + rfcSeedHex,                    // 11
		"," + rfcSeedHex,                              // 12
		`bad"quote,` + rfcSeedHex,                     // 13: CSV syntax error
		"latin1," + rfcSeedHex + ",hotp,6,,\xe9t\xe9", // 14
		"after," + rfcSeedHex + ",totp",               // 15: still read
	}, "\n")
	recs, fails := parseOATH(t, in)
	if len(recs) != 2 || recs[0].Serial != "good" || recs[1].Serial != "after" || recs[1].Type != "totp" {
		t.Fatalf("records = %v, want good and after", recs)
	}
	want := []struct {
		serial string
		line   int
		reason string
	}{
		{"nothex", 2, "key is not hex"},
		{"oddhex", 3, "key is not hex"},
		{"nokey", 4, "missing key"},
		{"badlen", 5, "otplen must be 6 or 8"},
		{"textlen", 6, "otplen must be 6 or 8"},
		{"badtype", 7, `unsupported token type "motp"`},
		{"badstep", 8, "time step must be 30 or 60"},
		{"good", 9, "duplicate serial (first at line 1)"},
		{"", 10, "serial may only contain"},
		{"", 11, "serial may only contain"},
		{"", 12, "missing serial"},
		{"", 13, "not valid CSV"},
		{"latin1", 14, "UTF-8"},
	}
	if len(fails) != len(want) {
		t.Fatalf("failures = %+v", fails)
	}
	for i, w := range want {
		f := fails[i]
		if f.Serial != w.serial || f.Line != w.line || !strings.Contains(f.Reason, w.reason) {
			t.Errorf("failure %d = %+v, want %+v", i, f, w)
		}
	}
}

// lines generates n OATH CSV lines without holding them in memory, and
// counts how many it produced.
type lines struct {
	n, made int
	buf     []byte
}

func (l *lines) Read(p []byte) (int, error) {
	for len(l.buf) < len(p) && l.made < l.n {
		l.buf = fmt.Appendf(l.buf, "tok%07d,%s,hotp,6\n", l.made, rfcSeedHex)
		l.made++
	}
	if len(l.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

func TestParseOATHCSVLimits(t *testing.T) {
	t.Run("a million lines", func(t *testing.T) {
		src := &lines{n: 1_000_000}
		recs, fails, err := tokenfile.ParseOATHCSV(src, tokenfile.Limits{})
		wantWrapped(t, err, tokenfile.ErrTooLarge)
		if recs != nil || fails != nil {
			t.Error("partial result with the error")
		}
		// The parser stops at the record limit instead of reading on.
		if src.made > 2*tokenfile.DefaultMaxRecords {
			t.Errorf("read %d lines", src.made)
		}
	})
	t.Run("a million lines, byte cap first", func(t *testing.T) {
		_, _, err := tokenfile.ParseOATHCSV(&lines{n: 1_000_000}, tokenfile.Limits{MaxRecords: 2_000_000})
		wantWrapped(t, err, tokenfile.ErrTooLarge)
		if !strings.Contains(err.Error(), "bytes") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("at the record limit", func(t *testing.T) {
		recs, _, err := tokenfile.ParseOATHCSV(&lines{n: 100}, tokenfile.Limits{MaxRecords: 100})
		if err != nil || len(recs) != 100 {
			t.Fatalf("%d records, %v", len(recs), err)
		}
	})
	t.Run("failures count", func(t *testing.T) {
		in := strings.Repeat("x,zz\n", 11)
		_, _, err := tokenfile.ParseOATHCSV(strings.NewReader(in), tokenfile.Limits{MaxRecords: 10})
		wantWrapped(t, err, tokenfile.ErrTooLarge)
	})
	t.Run("over MaxBytes", func(t *testing.T) {
		in := "a," + rfcSeedHex + "\nb," + rfcSeedHex + "\n"
		_, _, err := tokenfile.ParseOATHCSV(strings.NewReader(in), tokenfile.Limits{MaxBytes: int64(len(in)) - 1})
		wantWrapped(t, err, tokenfile.ErrTooLarge)
		recs, _, err := tokenfile.ParseOATHCSV(strings.NewReader(in), tokenfile.Limits{MaxBytes: int64(len(in))})
		if err != nil || len(recs) != 2 {
			t.Fatalf("at MaxBytes: %v, %v", recs, err)
		}
	})
	t.Run("endless", func(t *testing.T) {
		_, _, err := tokenfile.ParseOATHCSV(endless{}, tokenfile.Limits{})
		wantWrapped(t, err, tokenfile.ErrTooLarge)
	})
}

// errReader fails after its data.
type errReader struct{ data string }

func (e *errReader) Read(p []byte) (int, error) {
	if e.data == "" {
		return 0, io.ErrClosedPipe
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestParseOATHCSVReadError(t *testing.T) {
	recs, fails, err := tokenfile.ParseOATHCSV(&errReader{data: "a," + rfcSeedHex + "\n"}, tokenfile.Limits{})
	if err == nil || recs != nil || fails != nil {
		t.Fatalf("got %v, %v, %v", recs, fails, err)
	}
	wantWrapped(t, err, io.ErrClosedPipe)
}
