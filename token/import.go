package token

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// ImportRecord is one token to import, as an import file (OATH CSV,
// Yubikey CSV, PSKC) describes it. A Go program builds it from its own
// files; the HTTP import converts the records of its parsers. Key holds
// the seed, so an ImportRecord must never be logged or encoded into a
// response; String redacts it.
type ImportRecord struct {
	Serial      string
	Type        string            // lower-case: "hotp", "totp", "yubikey", ...; "" means hotp
	Key         []byte            // the raw seed bytes (never hex)
	OTPLen      int               // 0 = the type's default
	Counter     uint64            // initial counter (HOTP) if given
	TimeStep    int               // TOTP time step in seconds, 0 = the default
	HashLib     string            // "sha1", "sha256", "sha512" or ""
	Description string            // free text
	User        string            // owner login if the file carries one (not assigned by Import)
	Realm       string            // owner realm if the file carries one (not assigned by Import)
	Info        map[string]string // extra tokeninfo, may be nil
}

// String redacts the key, so that a record printed by mistake leaks no
// seed.
func (r ImportRecord) String() string {
	return fmt.Sprintf("{Serial:%s Type:%s Key:[%d bytes redacted] OTPLen:%d Counter:%d TimeStep:%d HashLib:%s User:%s Realm:%s}",
		r.Serial, r.Type, len(r.Key), r.OTPLen, r.Counter, r.TimeStep, r.HashLib, r.User, r.Realm)
}

// GoString redacts the key from %#v as well.
func (r ImportRecord) GoString() string { return "token.ImportRecord" + r.String() }

// ImportFailure is one record of an import file that was not imported.
type ImportFailure struct {
	Serial string `json:"serial"`
	Reason string `json:"reason"`
}

// Import creates tokens from records read from an import file. An existing
// serial is never touched (the record is reported as not imported); a
// record whose type is unknown or whose data the type refuses is reported
// too. realms become the token realms of every imported token. The tokens
// are written in one transaction, with also.
func (s *Service) Import(ctx context.Context, recs []ImportRecord, realms []string, also ...func(store.Tx) error) (int, []ImportFailure) {
	b := s.PrepareImport(ctx, recs, realms)
	if err := s.CommitImport(ctx, b, also...); err != nil {
		return 0, importFailed(b, err)
	}
	return len(b.items), b.Failed
}

// PrepareImport is the part of Import that needs no transaction: the
// batch CommitImport writes.
func (s *Service) PrepareImport(ctx context.Context, recs []ImportRecord, realms []string) *ImportBatch {
	b := &ImportBatch{}
	failed := &b.Failed
	for _, r := range recs {
		if ok, err := s.stored(ctx, r.Serial); err != nil || ok {
			reason := "a token with this serial already exists"
			if err != nil {
				reason = "the token store failed"
			}
			*failed = append(*failed, ImportFailure{r.Serial, reason})
			continue
		}
		typ := r.Type
		if typ == "" {
			typ = "hotp"
		}
		p := Params{"otpkey": hex.EncodeToString(r.Key), "description": r.Description}
		if r.OTPLen > 0 {
			p["otplen"] = strconv.Itoa(r.OTPLen)
		}
		if r.TimeStep > 0 {
			p["timeStep"] = strconv.Itoa(r.TimeStep)
		}
		if r.HashLib != "" {
			p["hashlib"] = r.HashLib
		} else if typ == "hotp" || typ == "totp" {
			// A file that names no hash describes SHA-1 tokens: the
			// system default of new enrollments (hotp.hashlib,
			// totp.hashlib) does not apply.
			p["hashlib"] = "sha1"
		}
		for k, v := range r.Info {
			if k != InfoTokenKind {
				p[typ+"."+k] = v
			}
		}
		kind := KindHardware
		if v := r.Info[InfoTokenKind]; v != "" {
			kind = v
		}
		err := b.add(ctx, s, InitRequest{Type: typ, Serial: r.Serial, Params: p, Realms: realms, Kind: kind, NoImages: true}, r.Counter)
		if err != nil {
			reason := "the token could not be created"
			if e, ok := err.(*apierr.Error); ok {
				reason = e.Error()
			}
			*failed = append(*failed, ImportFailure{r.Serial, reason})
		}
	}
	return b
}
