package token

import (
	"bytes"
	"context"
	"encoding/binary"

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
	p := headReader{b: raw[1:]}
	if p.uvarint() != schema {
		t, err := decodeRecord(string(serial), raw)
		if err != nil {
			return recordHead{}, false
		}
		return recordHead{active: t.Active, assigned: t.Assigned(), kind: []byte(t.Info[InfoTokenKind])}, true
	}
	var h recordHead
	p.uvarint() // id
	p.str()     // serial
	p.str()     // type
	p.str()     // description
	flags := p.byte1()
	h.active = flags&flagActive != 0
	p.str() // rollout state
	p.varint()
	p.uvarint() // count
	for range 4 {
		p.varint() // count window, sync window, fail count, max fail
	}
	n := p.uvarint()
	for i := uint64(0); i < n && !p.bad; i++ {
		k, v := p.str(), p.str()
		if bytes.Equal(k, infoKindKey) {
			h.kind = v
		}
	}
	if realms := p.uvarint(); realms > 0 {
		for i := uint64(0); i < realms-1 && !p.bad; i++ {
			p.str()
		}
	}
	if flags&flagOwner != 0 {
		p.str() // login
		p.str() // realm
		p.str() // resolver
		h.assigned = len(p.str()) > 0
	}
	return h, !p.bad
}

// headReader reads the binary record form without copying; the first
// error sticks.
type headReader struct {
	b   []byte
	bad bool
}

func (r *headReader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *headReader) varint() {
	if r.bad {
		return
	}
	if _, n := binary.Varint(r.b); n <= 0 {
		r.bad = true
	} else {
		r.b = r.b[n:]
	}
}

func (r *headReader) byte1() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *headReader) str() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
