package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/authsrv/authsrv/store"
)

// Kinds of Problem.
const (
	// ProblemEdited: the entry's hash recomputed from its columns and its
	// stored prev differs from its stored hash, or the entry sits under
	// another number than its own.
	ProblemEdited = "edited"
	// ProblemSignature: no valid seal covers the entry as it is now (or,
	// for an entry written before seals, its own signature does not
	// verify).
	ProblemSignature = "signature"
	// ProblemChain: the entry's prev hash does not link to the entry
	// before it.
	ProblemChain = "chain"
	// ProblemDeleted: numbers are missing in the middle of the log.
	ProblemDeleted = "deleted"
	// ProblemTruncated: entries after the last present one are missing,
	// as the signed head or a numbered checkpoint shows.
	ProblemTruncated = "truncated"
	// ProblemCheckpoint: a numbered or base checkpoint or a seal is
	// unsigned, undecodable or disagrees with its entry.
	ProblemCheckpoint = "checkpoint"
	// ProblemHead: the head checkpoint is missing while the log has
	// entries, undecodable, not signed by the log's key, or disagrees with
	// the last entry.
	ProblemHead = "head"
	// ProblemUndecodable: an entry's bytes do not decode.
	ProblemUndecodable = "undecodable"
)

// kindOrder sorts the problems of one number.
var kindOrder = map[string]int{
	ProblemUndecodable: 0, ProblemEdited: 1, ProblemSignature: 2, ProblemChain: 3,
	ProblemDeleted: 4, ProblemCheckpoint: 5, ProblemTruncated: 6, ProblemHead: 7,
}

// Problem is one finding of Verify. Number is the entry it concerns (the
// first one of a range).
type Problem struct {
	Number uint64
	Kind   string
	Detail string
}

func (p Problem) String() string { return fmt.Sprintf("%d %s: %s", p.Number, p.Kind, p.Detail) }

// Report is the result of Verify: how many entries are present, the first
// and last number present, and every problem found, ordered by number.
type Report struct {
	Entries     uint64
	First, Last uint64
	Problems    []Problem
}

// OK reports whether the log verified without problems.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Verify checks the whole log with the log's own public key.
func (l *Log) Verify(ctx context.Context) (Report, error) {
	return VerifyStore(ctx, l.cfg.Store, l.pub)
}

// VerifyStore checks the audit log in st with pub, so that a copy of the
// data file can be checked offline (`authsrv audit verify`) with only the
// public key. It walks the log once with a cursor in one read transaction;
// signatures are checked on all CPUs.
func VerifyStore(ctx context.Context, st store.Store, pub ed25519.PublicKey) (Report, error) {
	if len(pub) != ed25519.PublicKeySize {
		return Report{}, errors.New("audit verify: the key must be an Ed25519 public key")
	}
	var rep Report
	err := st.View(ctx, func(tx store.Tx) error {
		v := &verifier{ctx: ctx, tx: tx, pub: pub}
		var err error
		rep, err = v.run()
		return err
	})
	if err != nil {
		return Report{}, fmt.Errorf("audit verify: %w", err)
	}
	return rep, nil
}

// verifyItem is an entry handed to the signature workers.
type verifyItem struct {
	num uint64
	rec record
}

// verifier is one run of VerifyStore inside its read transaction.
type verifier struct {
	ctx context.Context
	tx  store.Tx
	pub ed25519.PublicKey

	problems []Problem

	// The base checkpoint, when one exists and verifies.
	base *checkpoint

	// Numbered checkpoints are walked in step with the entries.
	cps   store.Cursor
	cpKey []byte
	cpVal []byte
	// maxCheckpoint is the highest valid numbered checkpoint or seal seen
	// beyond the last entry.
	maxCheckpoint uint64
	maxIsSeal     bool

	// Seals are walked in step with the entries too; unsealed holds the
	// entries since the last seal, in order and without gaps.
	seals    store.Cursor
	sealKey  []byte
	sealVal  []byte
	unsealed []sealItem
}

// sealItem is an entry waiting for the seal of its commit.
type sealItem struct {
	num    uint64
	hash   []byte
	signed bool // it carries a signature of its own
}

func (v *verifier) add(n uint64, kind, format string, args ...any) {
	v.problems = append(v.problems, Problem{Number: n, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// missing reports the numbers from..to (inclusive) as deleted.
func (v *verifier) missing(from, to uint64) {
	if from == to {
		v.add(from, ProblemDeleted, "entry %d is missing", from)
		return
	}
	v.add(from, ProblemDeleted, "entries %d-%d are missing (%d entries)", from, to, to-from+1)
}

// readCheckpoint decodes and checks one signed checkpoint of kind. It
// reports whether c can be trusted; failures are added as problems of
// problemKind under keyNum, or under the number the checkpoint names when
// keyNum is 0.
func (v *verifier) readCheckpoint(raw []byte, kind, problemKind string, keyNum uint64) (checkpoint, bool) {
	var c checkpoint
	if err := json.Unmarshal(raw, &c); err != nil {
		v.add(keyNum, problemKind, "%s checkpoint does not decode: %v", kind, err)
		return c, false
	}
	n := keyNum
	if n == 0 {
		n = c.Number
	}
	// The head is the last seal (a head of its own in older logs).
	if c.Kind != kind && (kind != "head" || c.Kind != sealKind) {
		v.add(n, problemKind, "%s checkpoint is marked %q", kind, c.Kind)
		return c, false
	}
	if !ed25519.Verify(v.pub, c.message(), c.Sig) {
		v.add(n, problemKind, "%s checkpoint for entry %d is not signed by the log's key", kind, c.Number)
		return c, false
	}
	return c, true
}

// checkpointsUpTo walks the numbered checkpoints below n (they belong to
// entries that are missing or lie before the base; their signatures are
// still checked) and returns the checkpoint at n, if there is a valid one.
func (v *verifier) checkpointsUpTo(n uint64) (checkpoint, bool) {
	for v.cpKey != nil {
		num := store.KeyUint64(v.cpKey)
		if num > n {
			return checkpoint{}, false
		}
		c, ok := v.readCheckpoint(v.cpVal, "checkpoint", ProblemCheckpoint, num)
		if ok && c.Number != num {
			v.add(num, ProblemCheckpoint, "checkpoint stored under %d names entry %d", num, c.Number)
			ok = false
		}
		v.cpKey, v.cpVal = v.cps.Next()
		if num == n && ok {
			return c, true
		}
	}
	return checkpoint{}, false
}

// sealsUpTo walks the seals below n (they belong to entries that are
// missing; their signatures are still checked) and returns the seal at n,
// if there is a valid one.
func (v *verifier) sealsUpTo(n uint64) (checkpoint, bool) {
	for v.sealKey != nil {
		num := store.KeyUint64(v.sealKey)
		if num > n {
			return checkpoint{}, false
		}
		c, ok := v.readCheckpoint(v.sealVal, sealKind, ProblemCheckpoint, num)
		if ok && (c.Number != num || c.First == 0 || c.First > num) {
			v.add(num, ProblemCheckpoint, "seal stored under %d names entries %d-%d", num, c.First, c.Number)
			ok = false
		}
		v.sealKey, v.sealVal = v.seals.Next()
		if num == n && ok {
			return c, true
		}
	}
	return checkpoint{}, false
}

// seal checks the entries waiting for a seal against c, the valid seal of
// the last of them: those of its commit are sealed when their hashes give
// its digest. Whatever stays unsealed is reported.
func (v *verifier) seal(c checkpoint) {
	i := len(v.unsealed)
	for i > 0 && v.unsealed[i-1].num >= c.First {
		i--
	}
	group := v.unsealed[i:]
	if len(group) > 0 && group[0].num == c.First {
		h := sha256.New()
		for _, it := range group {
			h.Write(it.hash)
		}
		if bytes.Equal(h.Sum(nil), c.Digest) {
			v.unsealed = v.unsealed[:i]
			v.flushUnsealed("covered by no valid seal")
			return
		}
	}
	v.unsealed = v.unsealed[:i]
	v.flushUnsealed("covered by no valid seal")
	v.unsealed = group
	v.flushUnsealed(fmt.Sprintf("not as the seal of entry %d signed them", c.Number))
}

// flushUnsealed reports the waiting entries that have no signature of
// their own, in runs, and empties the list.
func (v *verifier) flushUnsealed(why string) {
	for i := 0; i < len(v.unsealed); {
		if v.unsealed[i].signed {
			i++
			continue
		}
		j := i
		for j+1 < len(v.unsealed) && !v.unsealed[j+1].signed && v.unsealed[j+1].num == v.unsealed[j].num+1 {
			j++
		}
		from, to := v.unsealed[i].num, v.unsealed[j].num
		if from == to {
			v.add(from, ProblemSignature, "entry %d is %s", from, why)
		} else {
			v.add(from, ProblemSignature, "entries %d-%d are %s", from, to, why)
		}
		i = j + 1
	}
	v.unsealed = v.unsealed[:0]
}

func (v *verifier) run() (Report, error) {
	var rep Report
	meta := v.tx.Bucket(metaBucket)

	// start is the first number the log should hold.
	start := uint64(1)
	if raw := meta.Get(baseKey); raw != nil {
		// Without a trusted base the log must start at 1, so entries
		// that retention removed show up as deleted.
		if c, ok := v.readCheckpoint(raw, "base", ProblemCheckpoint, 0); ok {
			v.base = &c
			start = max(1, c.Number)
		}
	}

	v.cps = v.tx.Bucket(checkpointBucket).Cursor()
	v.cpKey, v.cpVal = v.cps.First()
	v.seals = v.tx.Bucket(sealBucket).Cursor()
	v.sealKey, v.sealVal = v.seals.First()

	// Hashes and signatures are checked by workers; the walk checks
	// numbering, links and checkpoints.
	workers := max(1, runtime.GOMAXPROCS(0))
	batches := make(chan []verifyItem, workers)
	found := make([][]Problem, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for batch := range batches {
				for _, it := range batch {
					found[w] = checkEntry(found[w], v.pub, it.num, &it.rec)
				}
			}
		})
	}
	const batchSize = 256
	batch := make([]verifyItem, 0, batchSize)

	var (
		prevNum    uint64 // last entry number seen, 0 before the first
		prevHash   []byte
		prevKnown  bool // prevHash is valid: the previous entry decoded
		walkErr    error
		beforeBase bool // an entry before the base was reported
	)
	c := v.tx.Bucket(entryBucket).Cursor()
	for k, raw := c.First(); k != nil; k, raw = c.Next() {
		if rep.Entries%4096 == 0 {
			if walkErr = v.ctx.Err(); walkErr != nil {
				break
			}
		}
		if len(k) != 8 {
			v.add(0, ProblemUndecodable, "key %x is not an entry number", k)
			continue
		}
		num := store.KeyUint64(k)
		rep.Entries++
		if prevNum == 0 {
			rep.First = num
			if num > start {
				v.missing(start, num-1)
			}
		} else if num > prevNum+1 {
			v.missing(prevNum+1, num-1)
		}
		if v.base != nil && num < v.base.Number {
			// Retention removes everything before the base in the same
			// transaction that moves it: such entries were put back, or
			// the base was moved past them.
			if !beforeBase {
				v.add(num, ProblemCheckpoint, "entry %d and later ones lie before the base checkpoint (%d)", num, v.base.Number)
			}
			beforeBase = true
		}
		linked := prevNum != 0 && num == prevNum+1 && prevKnown
		prevNum, prevKnown = num, false
		rep.Last = num

		var rec record
		if err := decodeRecord(raw, &rec, decodeAll); err != nil {
			v.add(num, ProblemUndecodable, "entry %d does not decode: %v", num, err)
			v.checkpointsUpTo(num)
			v.sealsUpTo(num)
			continue
		}
		switch {
		case linked:
			if !bytes.Equal(rec.Prev, prevHash) {
				v.add(num, ProblemChain, "entry %d does not link to entry %d", num, num-1)
			}
		case num == 1 && (v.base == nil || v.base.Number != 1):
			if len(rec.Prev) != 0 {
				v.add(num, ProblemChain, "entry 1 links to a predecessor")
			}
		}
		if v.base != nil && num == v.base.Number && !bytes.Equal(rec.Prev, v.base.Hash) {
			v.add(num, ProblemCheckpoint, "entry %d does not link to the base checkpoint", num)
		}
		if cp, ok := v.checkpointsUpTo(num); ok && !bytes.Equal(cp.Hash, rec.Hash) {
			v.add(num, ProblemCheckpoint, "checkpoint %d disagrees with the entry's hash", num)
		}
		prevHash, prevKnown = rec.Hash, true
		// A seal covers a run of entries without gaps: a gap leaves the
		// entries before it without one. (A broken link in the run is
		// reported above; the seal's digest then shows whether the
		// stored hashes are the signed ones.)
		if !linked {
			v.flushUnsealed("covered by no valid seal")
		}
		v.unsealed = append(v.unsealed, sealItem{num: num, hash: rec.Hash, signed: len(rec.Sig) > 0})
		if c, ok := v.sealsUpTo(num); ok {
			v.seal(c)
		}

		batch = append(batch, verifyItem{num: num, rec: rec})
		if len(batch) == batchSize {
			batches <- batch
			batch = make([]verifyItem, 0, batchSize)
		}
	}
	if len(batch) > 0 && walkErr == nil {
		batches <- batch
	}
	close(batches)
	wg.Wait()
	if walkErr != nil {
		return Report{}, walkErr
	}

	// What lies beyond the last entry: numbered checkpoints, then the head.
	end := rep.Last
	if rep.Entries == 0 {
		end = start - 1
	}
	v.flushUnsealed("covered by no valid seal")
	for v.cpKey != nil {
		num := store.KeyUint64(v.cpKey)
		if cp, ok := v.checkpointsUpTo(num); ok && num > end {
			v.maxCheckpoint = max(v.maxCheckpoint, cp.Number)
		}
	}
	for v.sealKey != nil {
		num := store.KeyUint64(v.sealKey)
		if c, ok := v.sealsUpTo(num); ok && num > end && c.Number > v.maxCheckpoint {
			v.maxCheckpoint, v.maxIsSeal = c.Number, true
		}
	}
	headNum := v.checkHead(meta, rep, end, prevHash, prevKnown)
	if claim := max(headNum, v.maxCheckpoint); claim > end {
		by := "the signed head names"
		switch {
		case v.maxCheckpoint > headNum && v.maxIsSeal:
			by = fmt.Sprintf("the signed seal of entry %d names", v.maxCheckpoint)
		case v.maxCheckpoint > headNum:
			by = fmt.Sprintf("signed checkpoint %d names", v.maxCheckpoint)
		case v.maxCheckpoint == headNum && !v.maxIsSeal:
			by = "the signed head and a checkpoint name"
		}
		v.add(end+1, ProblemTruncated, "entries %d-%d after the last entry are missing (%s entry %d)", end+1, claim, by, claim)
	}

	for _, f := range found {
		v.problems = append(v.problems, f...)
	}
	slices.SortStableFunc(v.problems, func(a, b Problem) int {
		if a.Number != b.Number {
			if a.Number < b.Number {
				return -1
			}
			return 1
		}
		return kindOrder[a.Kind] - kindOrder[b.Kind]
	})
	rep.Problems = v.problems
	return rep, nil
}

// checkHead checks the head checkpoint against the end of the log and
// returns the number it names when it can be trusted (0 otherwise).
// lastHash is the hash of the last entry, when it decoded.
func (v *verifier) checkHead(meta store.Bucket, rep Report, end uint64, lastHash []byte, lastKnown bool) uint64 {
	raw := meta.Get(headKey)
	if raw == nil {
		if rep.Entries > 0 || v.base != nil {
			v.add(end, ProblemHead, "the head checkpoint is missing")
		}
		return 0
	}
	head, ok := v.readCheckpoint(raw, "head", ProblemHead, 0)
	if !ok {
		return 0
	}
	switch {
	case head.Number < end:
		v.add(head.Number, ProblemHead, "the head names entry %d but the log continues to %d", head.Number, end)
	case head.Number == end && rep.Entries > 0:
		if lastKnown && !bytes.Equal(head.Hash, lastHash) {
			v.add(end, ProblemHead, "the head disagrees with entry %d", end)
		}
	case head.Number == end && v.base != nil:
		if !bytes.Equal(head.Hash, v.base.Hash) {
			v.add(end, ProblemHead, "the head disagrees with the base checkpoint")
		}
	}
	return head.Number
}

// checkEntry appends the problems of one decoded entry stored under num:
// its number, its hash and, on an entry written before seals, its
// signature.
func checkEntry(ps []Problem, pub ed25519.PublicKey, num uint64, rec *record) []Problem {
	if rec.Entry.Number != num {
		ps = append(ps, Problem{num, ProblemEdited, fmt.Sprintf("entry stored under %d is numbered %d", num, rec.Entry.Number)})
	}
	h := hashEntry(rec.Prev, rec.Entry)
	if !bytes.Equal(h, rec.Hash) {
		ps = append(ps, Problem{num, ProblemEdited, fmt.Sprintf("entry %d does not match its hash", num)})
	}
	if len(rec.Sig) > 0 && !ed25519.Verify(pub, contentHash(rec.Entry), rec.Sig) {
		ps = append(ps, Problem{num, ProblemSignature, fmt.Sprintf("the signature of entry %d does not verify", num)})
	}
	return ps
}

// entryOK reports whether the entry stored under num is as it was
// written: the stored hash equals the recomputation and, on an entry
// written before seals, its signature verifies. Whether a seal covers it
// is the caller's question.
func entryOK(pub ed25519.PublicKey, num uint64, rec *record) bool {
	if rec.Entry.Number != num {
		return false
	}
	h := hashEntry(rec.Prev, rec.Entry)
	return bytes.Equal(h, rec.Hash) && (len(rec.Sig) == 0 || ed25519.Verify(pub, contentHash(rec.Entry), rec.Sig))
}
