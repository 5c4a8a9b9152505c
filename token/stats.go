package token

import (
	"bytes"
	"context"

	"github.com/authsrv/authsrv/store"
)

// TokenStats are the token numbers of privacyIDEA's SimpleStats task (the
// monitoring keys of the same names).
type TokenStats struct {
	// Total is the number of tokens (total_tokens).
	Total int
	// Hardware and Software count the tokens whose tokenkind is
	// "hardware" or "software" (hardware_tokens, software_tokens); a
	// token of another kind (none, "virtual") is in neither.
	Hardware, Software int
	// UnassignedHardware counts the hardware tokens without an owner
	// (unassigned_hardware_tokens).
	UnassignedHardware int
	// Assigned counts the tokens with an owner (assigned_tokens).
	Assigned int
	// UsersWithToken counts the distinct users (resolver and user id)
	// that own an active token (user_with_token).
	UsersWithToken int
}

// Stats computes the SimpleStats numbers in one read transaction without
// decoding the token records: the total and the assigned tokens are the
// list indexes' counters; the users come from the keys of the
// tokens-by-owner index; the kind, which no index keeps, is read from
// the head of each stored record (the fields before the sealed ones, with
// no allocation per token). A record that does not read counts in neither
// kind.
func (s *Service) Stats(ctx context.Context) (TokenStats, error) {
	var out TokenStats
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		out = TokenStats{}
		inactive := map[string]struct{}{}
		total, assigned := 0, 0
		if err := tx.Bucket(bucketTokens).ForEach(nil, func(k, v []byte) error {
			h, ok := peekHead(k, v)
			if !ok {
				return nil
			}
			total++
			if h.assigned {
				assigned++
			}
			if !h.active {
				inactive[string(k)] = struct{}{}
			}
			switch {
			case bytes.Equal(h.kind, kindHardware):
				out.Hardware++
				if !h.assigned {
					out.UnassignedHardware++
				}
			case bytes.Equal(h.kind, kindSoftware):
				out.Software++
			}
			return nil
		}); err != nil {
			return err
		}
		out.Total, out.Assigned = total, assigned
		if indexesComplete(tx) {
			counts := tx.Bucket(bucketCounts)
			out.Total = readCounter(counts, cntAll)
			out.Assigned = readCounter(counts, counterKey(cntAssigned, string(b2byte(true))))
		}
		users := map[string]struct{}{}
		err := tx.Bucket(bucketOwner).ForEach(nil, func(k, _ []byte) error {
			// lower(realm) \0 resolver \0 uid \0 serial
			parts := bytes.SplitN(k, []byte{0}, 4)
			if len(parts) != 4 {
				return nil
			}
			if _, off := inactive[string(parts[3])]; off {
				return nil
			}
			users[string(parts[1])+"\x00"+string(parts[2])] = struct{}{}
			return nil
		})
		out.UsersWithToken = len(users)
		return err
	})
	if err != nil {
		return TokenStats{}, err
	}
	return out, nil
}

var (
	kindHardware = []byte(KindHardware)
	kindSoftware = []byte(KindSoftware)
	infoKindKey  = []byte(InfoTokenKind)
)

// recordHead is what Stats reads of a stored record.
type recordHead struct {
	active, assigned bool
	// kind is the tokenkind (a slice of the record).
	kind []byte
}

// peekHead reads the head of a stored record (see codec.go for the
// binary form). A record of another schema or the JSON form of older
// releases is decoded instead.
func peekHead(serial, raw []byte) (recordHead, bool) {
	if len(raw) == 0 || raw[0] != recordMarker {
		t, err := decodeRecord(string(serial), raw)
		if err != nil {
			return recordHead{}, false
		}
		return recordHead{active: t.Active, assigned: t.Assigned(), kind: []byte(t.Info[InfoTokenKind])}, true
	}
	p := attrReader{b: raw[1:]}
	if p.uvarint() != schema {
		t, err := decodeRecord(string(serial), raw)
		if err != nil {
			return recordHead{}, false
		}
		return recordHead{active: t.Active, assigned: t.Assigned(), kind: []byte(t.Info[InfoTokenKind])}, true
	}
	var h recordHead
	p.uvarint() // id
	p.bytes()   // serial
	p.bytes()   // type
	p.bytes()   // description
	flags := p.byte1()
	h.active = flags&flagActive != 0
	p.bytes() // rollout state
	p.varint()
	p.uvarint() // count
	for range 4 {
		p.varint() // count window, sync window, fail count, max fail
	}
	n := p.uvarint()
	for i := uint64(0); i < n && !p.bad; i++ {
		k, v := p.bytes(), p.bytes()
		if bytes.Equal(k, infoKindKey) {
			h.kind = v
		}
	}
	if realms := p.uvarint(); realms > 0 {
		for i := uint64(0); i < realms-1 && !p.bad; i++ {
			p.bytes()
		}
	}
	if flags&flagOwner != 0 {
		p.bytes() // login
		p.bytes() // realm
		p.bytes() // resolver
		h.assigned = len(p.bytes()) > 0
	}
	return h, !p.bad
}
