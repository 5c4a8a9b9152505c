package token

import (
	"context"
	"encoding/hex"
	"strconv"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/tokenfile"
	"github.com/authsrv/authsrv/store"
)

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
func (s *Service) Import(ctx context.Context, recs []tokenfile.Record, realms []string, also ...func(store.Tx) error) (int, []ImportFailure) {
	b := s.PrepareImport(ctx, recs, realms)
	if err := s.CommitImport(ctx, b, also...); err != nil {
		return 0, importFailed(b, err)
	}
	return len(b.items), b.Failed
}

// PrepareImport is the part of Import that needs no transaction: the
// batch CommitImport writes.
func (s *Service) PrepareImport(ctx context.Context, recs []tokenfile.Record, realms []string) *ImportBatch {
	b := &ImportBatch{}
	failed := &b.Failed
	for _, r := range recs {
		if ok, err := s.Exists(ctx, r.Serial); err != nil || ok {
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
		err := b.add(ctx, s, InitRequest{Type: typ, Serial: r.Serial, Params: p, Realms: realms, Kind: kind}, r.Counter)
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
