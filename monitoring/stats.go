package monitoring

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// Statistics: time series of integers per key (privacyIDEA's
// monitoringstats table), read by GET /monitoring/... and written by the
// server's periodic recorder (the SimpleStats keys and the counters of
// the Counter event handler).
//
// One bucket holds every point under the key: stats key, 0x00, the time
// as 8 bytes that sort in time order. A series is one key prefix, so a
// window of it is a seek and a walk, the last point one seek, and the
// list of keys one seek per key.

// statsBucket holds the points.
const statsBucket = "monitoring.stats"

// statsMetaBucket holds the recorder's bookkeeping (the time of the last
// periodic record, which the nodes sharing a store use to record once
// per interval between them).
const statsMetaBucket = "monitoring.statsmeta"

// pointSchema is the version of the stored points.
const pointSchema = 1

// MaxStatsKeyLen bounds a statistics key in bytes (the column size of
// privacyIDEA's table).
const MaxStatsKeyLen = 128

// Defaults of Retention.
const (
	DefaultStatsRaw       = 7 * 24 * time.Hour
	DefaultStatsHourly    = 90 * 24 * time.Hour
	DefaultStatsMaxAge    = 2 * 365 * 24 * time.Hour
	DefaultStatsMaxPoints = 20000
	// statsPruneBatch bounds the points one retention transaction visits.
	statsPruneBatch = 5000
)

// ErrStatsKey is the answer for a key that cannot name a series.
var ErrStatsKey = apierr.Newf(apierr.Parameter, "A statistics key must be 1 to %d bytes of text without control characters.", MaxStatsKeyLen)

var lastRecordKey = []byte("last_record")

// Point is one value of a series.
type Point struct {
	// Time is when the value was measured (microsecond precision).
	Time time.Time
	// Value is the measured value.
	Value int64
}

// Retention bounds what a series keeps; Prune applies it. Points younger
// than Raw are all kept; older ones keep one point per hour (the newest
// of each hour), and those older than Hourly one per day; points older
// than MaxAge are deleted, and a series keeps at most MaxPoints (the
// oldest go first). A zero MaxAge or MaxPoints sets no such limit.
type Retention struct {
	Raw       time.Duration
	Hourly    time.Duration
	MaxAge    time.Duration
	MaxPoints int
}

// DefaultRetention is one week of every point, hourly points to 90 days,
// daily points to two years, and at most 20000 points per key: with the
// default 5-minute interval a key holds about 4700 points.
func DefaultRetention() Retention {
	return Retention{Raw: DefaultStatsRaw, Hourly: DefaultStatsHourly, MaxAge: DefaultStatsMaxAge, MaxPoints: DefaultStatsMaxPoints}
}

// Validate checks the limits.
func (r Retention) Validate() error {
	switch {
	case r.Raw <= 0 || r.Hourly < r.Raw:
		return errors.New("statistics retention: want 0 < raw period <= hourly period")
	case r.MaxAge < 0 || r.MaxPoints < 0:
		return errors.New("statistics retention: negative maximum age or points")
	}
	return nil
}

// Stats keeps the statistics time series in the store.
type Stats struct {
	st    store.Store
	ret   Retention
	batch int
}

// NewStats returns the statistics on st, pruned by ret (see Prune).
func NewStats(st store.Store, ret Retention) *Stats {
	return &Stats{st: st, ret: ret, batch: statsPruneBatch}
}

// ValidStatsKey reports whether key can name a series.
func ValidStatsKey(key string) bool {
	if key == "" || len(key) > MaxStatsKeyLen || !utf8.ValidString(key) {
		return false
	}
	return !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

type pointRecord struct {
	store.Versioned
	Value int64 `json:"value"`
}

// seriesPrefix is the key prefix of a series.
func seriesPrefix(key string) []byte {
	p := make([]byte, 0, len(key)+9)
	p = append(p, key...)
	return append(p, 0)
}

// pointTime encodes t (microseconds since 1970, sign flipped) so that
// byte order is time order.
func pointTime(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t.UnixMicro())^(1<<63))
}

// timeOf decodes a point's time.
func timeOf(b []byte) (time.Time, bool) {
	if len(b) != 8 {
		return time.Time{}, false
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b) ^ (1 << 63))).UTC(), true
}

func pointKey(prefix []byte, t time.Time) []byte {
	return append(bytes.Clone(prefix), pointTime(t)...)
}

func putPoint(b store.Bucket, key string, p Point) error {
	return store.PutJSON(b, pointKey(seriesPrefix(key), p.Time), pointRecord{Versioned: store.Versioned{Schema: pointSchema}, Value: p.Value})
}

func decodePoint(k, v []byte, prefix []byte) (Point, error) {
	t, ok := timeOf(k[len(prefix):])
	if !ok {
		return Point{}, fmt.Errorf("monitoring: malformed statistics key %q", k)
	}
	var rec pointRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return Point{}, fmt.Errorf("monitoring: decode %q: %w", k, err)
	}
	return Point{Time: t, Value: rec.Value}, nil
}

// Add stores value for key at t (a value at the same microsecond
// replaces the one there). Each of also runs in the same transaction.
func (s *Stats) Add(ctx context.Context, key string, t time.Time, value int64, also ...func(store.Tx) error) error {
	return s.AddPoints(ctx, key, []Point{{Time: t, Value: value}}, also...)
}

// AddPoints stores points of key in one transaction.
func (s *Stats) AddPoints(ctx context.Context, key string, points []Point, also ...func(store.Tx) error) error {
	if !ValidStatsKey(key) {
		return ErrStatsKey
	}
	return s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(statsBucket)
		for _, p := range points {
			if err := putPoint(b, key, p); err != nil {
				return err
			}
		}
		return store.RunAlso(tx, also)
	})
}

// Record stores values (key -> value) at t in one transaction, unless a
// record of this kind was made less than minGap before t (by this
// process or another sharing the store; minGap 0 always records). It
// reports whether it recorded. Keys that cannot name a series are
// skipped.
func (s *Stats) Record(ctx context.Context, t time.Time, values map[string]int64, minGap time.Duration) (bool, error) {
	recorded := false
	err := s.st.Update(ctx, func(tx store.Tx) error {
		recorded = false
		meta := tx.Bucket(statsMetaBucket)
		if last, ok := timeOf(meta.Get(lastRecordKey)); ok && minGap > 0 {
			if d := t.Sub(last); d < minGap && d > -minGap {
				return nil
			}
		}
		b := tx.Bucket(statsBucket)
		for k, v := range values {
			if !ValidStatsKey(k) {
				continue
			}
			if err := putPoint(b, k, Point{Time: t, Value: v}); err != nil {
				return err
			}
		}
		recorded = true
		return meta.Put(lastRecordKey, pointTime(t))
	})
	return recorded, err
}

// Keys lists the keys that have points, in order.
func (s *Stats) Keys(ctx context.Context) ([]string, error) {
	out := []string{}
	err := s.st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		c := tx.Bucket(statsBucket).Cursor()
		for k, _ := c.First(); k != nil; {
			i := bytes.IndexByte(k, 0)
			if i <= 0 {
				return fmt.Errorf("monitoring: malformed statistics key %q", k)
			}
			out = append(out, string(k[:i]))
			// The next series starts after every key "name\x00...".
			next := append(bytes.Clone(k[:i]), 1)
			k, _ = c.Seek(next)
		}
		return nil
	})
	return out, err
}

// inWindow reports whether t lies in [start, end]; a zero bound is open.
func inWindow(t, start, end time.Time) bool {
	return (start.IsZero() || !t.Before(start)) && (end.IsZero() || !t.After(end))
}

// walkWindow calls fn for the points of key in [start, end], in time
// order, inside tx.
func walkWindow(tx store.Tx, key string, start, end time.Time, fn func(k, v []byte, t time.Time) error) error {
	prefix := seriesPrefix(key)
	c := tx.Bucket(statsBucket).Cursor()
	from := prefix
	if !start.IsZero() {
		from = pointKey(prefix, start)
	}
	for k, v := c.Seek(from); store.HasPrefix(k, prefix); k, v = c.Next() {
		t, ok := timeOf(k[len(prefix):])
		if !ok {
			return fmt.Errorf("monitoring: malformed statistics key %q", k)
		}
		if !end.IsZero() && t.After(end) {
			return nil
		}
		if !inWindow(t, start, end) {
			continue
		}
		if err := fn(k, v, t); err != nil {
			return err
		}
	}
	return nil
}

// Range returns the points of key from start to end (both included; a
// zero time leaves that side open), oldest first. An unknown key has
// none.
func (s *Stats) Range(ctx context.Context, key string, start, end time.Time) ([]Point, error) {
	out := []Point{}
	if !ValidStatsKey(key) {
		return out, nil
	}
	prefix := seriesPrefix(key)
	err := s.st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return walkWindow(tx, key, start, end, func(k, v []byte, _ time.Time) error {
			p, err := decodePoint(k, v, prefix)
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// Last returns the newest point of key; ok is false when it has none.
func (s *Stats) Last(ctx context.Context, key string) (p Point, ok bool, err error) {
	if !ValidStatsKey(key) {
		return Point{}, false, nil
	}
	prefix := seriesPrefix(key)
	err = s.st.View(ctx, func(tx store.Tx) error {
		ok = false
		c := tx.Bucket(statsBucket).Cursor()
		end := append(bytes.Clone(prefix[:len(prefix)-1]), 1)
		k, v := c.Seek(end)
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		if !store.HasPrefix(k, prefix) {
			return nil
		}
		var err error
		p, err = decodePoint(k, v, prefix)
		ok = err == nil
		return err
	})
	return p, ok, err
}

// Delete removes the points of key from start to end (both included; a
// zero time leaves that side open) and returns how many it removed. Each
// of also runs in the same transaction (also when nothing was removed).
func (s *Stats) Delete(ctx context.Context, key string, start, end time.Time, also ...func(store.Tx) error) (int, error) {
	var n int
	err := s.st.Update(ctx, func(tx store.Tx) error {
		n = 0
		if ValidStatsKey(key) {
			var drop [][]byte
			if err := walkWindow(tx, key, start, end, func(k, _ []byte, _ time.Time) error {
				drop = append(drop, bytes.Clone(k))
				return nil
			}); err != nil {
				return err
			}
			b := tx.Bucket(statsBucket)
			for _, k := range drop {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			n = len(drop)
		}
		return store.RunAlso(tx, also)
	})
	return n, err
}

// Prune applies the retention to every series as of now and returns the
// number of points it deleted. It works in transactions that each visit
// a bounded number of points, so it never holds the store's writer for
// long; a point written meanwhile is seen by the next run.
func (s *Stats) Prune(ctx context.Context, now time.Time) (int, error) {
	keys, err := s.Keys(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, key := range keys {
		n, err := s.pruneSeries(ctx, key, now)
		total += n
		if err != nil {
			return total, fmt.Errorf("monitoring: pruning %q: %w", key, err)
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneState is where a series' pruning stands between transactions.
type pruneState struct {
	// from is the store key to go on from (nil: the series' start).
	from []byte
	// kept is the last point kept in the thinned part, and its slot (an
	// hour or a day, by tier).
	kept     []byte
	keptSlot int64
	keptTier byte
	// left is the number of points the series has left.
	left int
}

// slotOf is the thinning slot of a point at t: its UTC day when it is
// older than dayCut, else its hour.
func slotOf(t, dayCut time.Time) (byte, int64) {
	if t.Before(dayCut) {
		return 'd', t.Truncate(24 * time.Hour).Unix()
	}
	return 'h', t.Truncate(time.Hour).Unix()
}

func (s *Stats) pruneSeries(ctx context.Context, key string, now time.Time) (int, error) {
	prefix := seriesPrefix(key)
	count := 0
	if err := s.st.View(ctx, func(tx store.Tx) error {
		count = 0
		return tx.Bucket(statsBucket).ForEach(prefix, func(_, _ []byte) error { count++; return nil })
	}); err != nil {
		return 0, err
	}
	r := s.ret
	rawCut, dayCut := now.Add(-r.Raw), now.Add(-r.Hourly)
	var ageCut time.Time
	if r.MaxAge > 0 {
		ageCut = now.Add(-r.MaxAge)
	}
	st := pruneState{left: count}
	deleted := 0
	for {
		var next pruneState
		var n int
		var done bool
		err := s.st.Update(ctx, func(tx store.Tx) error {
			next, n, done = st, 0, false
			b := tx.Bucket(statsBucket)
			c := b.Cursor()
			from := next.from
			if from == nil {
				from = prefix
			}
			var drop [][]byte
			visited := 0
			k, _ := c.Seek(from)
		walk:
			for ; ; k, _ = c.Next() {
				if !store.HasPrefix(k, prefix) {
					done = true
					break
				}
				if visited == s.batch {
					next.from = bytes.Clone(k)
					break
				}
				visited++
				t, ok := timeOf(k[len(prefix):])
				if !ok {
					return fmt.Errorf("malformed statistics key %q", k)
				}
				switch {
				case !ageCut.IsZero() && t.Before(ageCut), r.MaxPoints > 0 && next.left > r.MaxPoints:
					drop = append(drop, bytes.Clone(k))
					next.left--
				case t.Before(rawCut):
					tier, slot := slotOf(t, dayCut)
					if next.kept != nil && tier == next.keptTier && slot == next.keptSlot {
						drop = append(drop, next.kept)
						next.left--
					}
					next.kept, next.keptTier, next.keptSlot = bytes.Clone(k), tier, slot
				default:
					// Younger points are all kept, and the cap holds.
					done = true
					break walk
				}
			}
			for _, d := range drop {
				if err := b.Delete(d); err != nil {
					return err
				}
			}
			n = len(drop)
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		st = next
		if done {
			return deleted, nil
		}
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
	}
}
