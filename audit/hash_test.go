package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"testing"
	"time"
)

// referenceHash is the chain hash as the first release computed it, field
// by field into the hash: hashEntry must give the same bytes, or entries
// in existing data files would no longer verify.
func referenceHash(prev []byte, e Entry) []byte {
	h := sha256.New()
	h.Write([]byte("authsrv-audit-entry\x00"))
	h.Write(prev)
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(strconv.FormatUint(e.Number, 10))
	field(e.Date.UTC().Format(time.RFC3339Nano))
	field(e.StartDate.UTC().Format(time.RFC3339Nano))
	field(strconv.FormatFloat(e.Duration, 'g', -1, 64))
	field(e.Action)
	field(strconv.FormatBool(e.Success))
	for _, s := range []string{e.Authentication, e.Serial, e.TokenType, e.User, e.Realm, e.Resolver,
		e.Administrator, e.ActionDetail, e.Info, e.Node, e.Client, e.UserAgent, e.UserAgentVersion,
		e.Policies, e.ThreadID} {
		field(s)
	}
	return h.Sum(nil)
}

func TestHashEntryUnchanged(t *testing.T) {
	for i, rec := range codecEntries() {
		big := rec.Entry
		big.Info = string(bytes.Repeat([]byte("x"), 3000)) // past the stack buffer
		for _, e := range []Entry{rec.Entry, big, {}} {
			for _, prev := range [][]byte{nil, rec.Hash} {
				if got, want := hashEntry(prev, e), referenceHash(prev, e); !bytes.Equal(got, want) {
					t.Errorf("%d: hash %x, want %x", i, got, want)
				}
			}
		}
	}
}
