package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/store"
)

// Client applications: which programs (by User-Agent) from which
// addresses authenticate against this server, and when each was last
// seen (privacyIDEA's clientapplication table and GET /client/).
//
// Recording is on the hot path of every /validate/check, so a
// ClientRecorder keeps what it saw in memory and writes it to the store
// from Flush, which the server runs once a minute: a client costs at most
// one store write per flush, however many requests it sends. The stored
// rows are keyed (client type, IP, node), so the nodes that share a store
// never overwrite each other's rows; List answers the newest last seen
// over all nodes, merged with what this node has not written yet.

// Defaults of ClientConfig.
const (
	// DefaultClientLimit bounds the clients a recorder keeps in memory.
	DefaultClientLimit = 100000
	// DefaultClientRetention is how long a client not seen again keeps
	// its stored rows.
	DefaultClientRetention = 90 * 24 * time.Hour
	// ClientFlushInterval is how often the server flushes a recorder.
	ClientFlushInterval = time.Minute
	// MaxClientTypeLen bounds a stored client type in bytes (the column
	// size of privacyIDEA's table); longer User-Agents are cut at a
	// character boundary.
	MaxClientTypeLen = 255
	// UnknownClientType names the clients that sent no User-Agent.
	UnknownClientType = "unknown"
)

// clientBucket holds one row per client type, IP and node.
const clientBucket = "clientapps"

// clientSchema is the version of the stored rows.
const clientSchema = 1

const (
	// clientShards spreads the recorder's map over independent parts.
	clientShards = 32
	// clientIdle is how long a written entry stays in memory without
	// being seen again (its stored row answers List after that).
	clientIdle = time.Hour
	// clientSweepEvery is how often Flush removes expired rows.
	clientSweepEvery = time.Hour
	// clientChunk bounds the rows one store write carries.
	clientChunk = 1000
	// clientDropLogEvery spaces the log lines about dropped clients.
	clientDropLogEvery = int64(60)
)

// noClientIP is the address recorded when a request has none.
var noClientIP = netip.IPv4Unspecified()

// ClientApp is one client application: a client type (the full
// User-Agent, UnknownClientType when there was none) seen from IP, last
// at LastSeen (whole seconds, UTC; the newest over all nodes).
type ClientApp struct {
	Type     string
	IP       netip.Addr
	LastSeen time.Time
}

// ClientConfig configures a ClientRecorder.
type ClientConfig struct {
	// Store keeps the rows; Node names this node in them.
	Store store.Store
	Node  string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log gets a line, at most once a minute, while clients are dropped
	// because the recorder is full, and flush failures.
	Log zerolog.Logger
	// Limit bounds the clients kept in memory (DefaultClientLimit when
	// 0); clients beyond it are counted in Dropped and not recorded
	// until Flush made room.
	Limit int
	// Retention is how long rows not seen again are kept
	// (DefaultClientRetention when 0).
	Retention time.Duration
}

// clientKey identifies a client in memory.
type clientKey struct {
	typ string
	ip  netip.Addr
}

// clientEntry is a client in memory: seen is its last seen (Unix
// seconds), written what the store holds of it (Flush's own, under
// flushMu).
type clientEntry struct {
	seen    atomic.Int64
	written int64
}

// touch raises the entry's last seen to now.
func (e *clientEntry) touch(now int64) {
	for {
		old := e.seen.Load()
		if old >= now || e.seen.CompareAndSwap(old, now) {
			return
		}
	}
}

type clientMap = map[clientKey]*clientEntry

// clientShard is one part of the map. Lookups of known clients read the
// immutable map in read without a lock; new clients go to fresh under
// mu, which is merged into read once enough lookups missed read (or at
// the next Flush).
type clientShard struct {
	read   atomic.Pointer[clientMap]
	mu     sync.Mutex
	fresh  clientMap
	misses int
	_      [64]byte // keep the shards' locks off each other's cache lines
}

// lookup finds k in the lock-free part of the shard.
func (sh *clientShard) lookup(k clientKey) *clientEntry {
	if m := sh.read.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

// promote merges fresh into read; mu is held.
func (sh *clientShard) promote() {
	old := sh.read.Load()
	n := len(sh.fresh)
	if old != nil {
		n += len(*old)
	}
	m := make(clientMap, n)
	if old != nil {
		for k, e := range *old {
			m[k] = e
		}
	}
	for k, e := range sh.fresh {
		m[k] = e
	}
	sh.read.Store(&m)
	sh.fresh = clientMap{}
	sh.misses = 0
}

// ClientRecorder records the client applications of authentication
// requests. Record is safe for concurrent use and never blocks on the
// store; Flush writes what changed.
type ClientRecorder struct {
	st        store.Store
	node      string
	now       func() time.Time
	log       zerolog.Logger
	limit     int64
	retention time.Duration
	seed      maphash.Seed

	shards  [clientShards]clientShard
	count   atomic.Int64
	dropped atomic.Uint64
	dropLog atomic.Int64 // Unix seconds of the last line about drops

	flushMu   sync.Mutex
	lastSweep time.Time
}

// NewClientRecorder returns a recorder on cfg.Store. It starts no
// goroutine: the caller runs Flush.
func NewClientRecorder(cfg ClientConfig) *ClientRecorder {
	r := &ClientRecorder{st: cfg.Store, node: cfg.Node, now: cfg.Now, log: cfg.Log,
		limit: int64(cfg.Limit), retention: cfg.Retention, seed: maphash.MakeSeed()}
	if r.now == nil {
		r.now = time.Now
	}
	if r.limit <= 0 {
		r.limit = DefaultClientLimit
	}
	if r.retention <= 0 {
		r.retention = DefaultClientRetention
	}
	for i := range r.shards {
		r.shards[i].fresh = clientMap{}
	}
	return r
}

// ClientType is the client type recorded for the User-Agent ua: ua
// itself, cut to MaxClientTypeLen bytes at a character boundary, with
// NUL bytes replaced, or UnknownClientType when ua is empty.
func ClientType(ua string) string {
	if ua == "" {
		return UnknownClientType
	}
	if len(ua) > MaxClientTypeLen {
		cut := MaxClientTypeLen
		for cut > 0 && !utf8.RuneStart(ua[cut]) {
			cut--
		}
		ua = ua[:cut]
	}
	if strings.IndexByte(ua, 0) >= 0 {
		ua = strings.ReplaceAll(ua, "\x00", "?")
	}
	return ua
}

// clientIP is the address recorded for ip (0.0.0.0 for none).
func clientIP(ip netip.Addr) netip.Addr {
	if !ip.IsValid() {
		return noClientIP
	}
	return ip.Unmap().WithZone("")
}

func (r *ClientRecorder) shardOf(k clientKey) *clientShard {
	h := maphash.String(r.seed, k.typ)
	b := k.ip.As16()
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 |
		uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	h ^= lo * 0x9e3779b97f4a7c15
	h ^= h >> 29
	return &r.shards[h%clientShards]
}

// Record notes that a client with the User-Agent ua (see ClientType)
// authenticated from ip (zero: 0.0.0.0) now. It writes nothing to the
// store; a known client costs no lock and no allocation.
func (r *ClientRecorder) Record(ua string, ip netip.Addr) {
	k := clientKey{typ: ClientType(ua), ip: clientIP(ip)}
	now := r.now().Unix()
	sh := r.shardOf(k)
	if e := sh.lookup(k); e != nil {
		e.touch(now)
		return
	}
	sh.mu.Lock()
	if e := sh.lookup(k); e != nil {
		sh.mu.Unlock()
		e.touch(now)
		return
	}
	if e := sh.fresh[k]; e != nil {
		// A client of this minute: look it up without the lock from
		// now on once lookups missed read as often as the shard holds
		// entries (each promotion copies the shard).
		sh.misses++
		if m := sh.read.Load(); sh.misses >= len(sh.fresh)+lenOf(m) {
			sh.promote()
		}
		sh.mu.Unlock()
		e.touch(now)
		return
	}
	if r.count.Load() >= r.limit {
		sh.mu.Unlock()
		r.drop(now)
		return
	}
	r.count.Add(1)
	k.typ = strings.Clone(k.typ)
	e := &clientEntry{}
	e.seen.Store(now)
	sh.fresh[k] = e
	sh.mu.Unlock()
}

func lenOf(m *clientMap) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// drop counts a client the full recorder did not keep, and logs it at
// most once a minute.
func (r *ClientRecorder) drop(now int64) {
	n := r.dropped.Add(1)
	last := r.dropLog.Load()
	if now-last < clientDropLogEvery || !r.dropLog.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn().Str("component", "monitoring").Uint64("dropped", n).Int64("limit", r.limit).
		Msg("client application recorder is full: new clients are not recorded until it has room")
}

// Dropped counts the clients not recorded because the recorder was full.
func (r *ClientRecorder) Dropped() uint64 { return r.dropped.Load() }

// Len is the number of clients held in memory.
func (r *ClientRecorder) Len() int { return int(r.count.Load()) }

// clientRecord is a stored row.
type clientRecord struct {
	store.Versioned
	ClientType string    `json:"clienttype"`
	IP         string    `json:"ip"`
	Node       string    `json:"node"`
	LastSeen   time.Time `json:"lastseen"`
}

// rowKey is the row of k on node: type, IP and node separated by NUL
// (which none of them holds), so that one client's rows are adjacent.
func rowKey(k clientKey, node string) []byte {
	ip := k.ip.String()
	b := make([]byte, 0, len(k.typ)+len(ip)+len(node)+2)
	b = append(b, k.typ...)
	b = append(b, 0)
	b = append(b, ip...)
	b = append(b, 0)
	return append(b, node...)
}

// pending is an entry Flush writes.
type pending struct {
	k    clientKey
	e    *clientEntry
	seen int64
}

// Flush writes the clients whose last seen moved since their last write
// (each in at most one row, however many requests it sent), merges the
// clients new since the last flush into the lock-free map, forgets the
// written clients not seen for an hour, and, once an hour, removes the
// stored rows of every node not seen within the retention. It returns the
// rows written and removed. On an error the unwritten clients stay
// pending for the next Flush.
func (r *ClientRecorder) Flush(ctx context.Context) (written, removed int, err error) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	now := r.now()
	idle := now.Add(-clientIdle).Unix()
	var todo []pending
	for i := range r.shards {
		todo = r.collect(&r.shards[i], idle, todo)
	}
	for chunk := range slices.Chunk(todo, clientChunk) {
		n, err := r.write(ctx, chunk)
		if err != nil {
			return written, 0, err
		}
		written += n
	}
	if r.lastSweep.IsZero() || now.Sub(r.lastSweep) >= clientSweepEvery {
		removed, err = r.sweep(ctx, now)
		if err != nil {
			return written, removed, err
		}
		r.lastSweep = now
	}
	return written, removed, nil
}

// collect merges sh's fresh clients into its read map, leaves out the
// written clients idle since before idle, and appends the clients to
// write to todo.
func (r *ClientRecorder) collect(sh *clientShard, idle int64, todo []pending) []pending {
	sh.mu.Lock()
	old := sh.read.Load()
	var evicted []pending
	keep := make(clientMap, lenOf(old)+len(sh.fresh))
	add := func(k clientKey, e *clientEntry) {
		seen := e.seen.Load()
		if seen == e.written && seen < idle {
			evicted = append(evicted, pending{k: k, e: e, seen: seen})
			return
		}
		keep[k] = e
		if seen > e.written {
			todo = append(todo, pending{k: k, e: e, seen: seen})
		}
	}
	if old != nil {
		for k, e := range *old {
			add(k, e)
		}
	}
	for k, e := range sh.fresh {
		add(k, e)
	}
	sh.read.Store(&keep)
	sh.fresh = clientMap{}
	sh.misses = 0
	// A Record that found an evicted entry in the old map just before
	// the swap touched it: keep that one.
	for _, p := range evicted {
		if p.e.seen.Load() != p.seen {
			sh.fresh[p.k] = p.e
			continue
		}
		r.count.Add(-1)
	}
	sh.mu.Unlock()
	return todo
}

// write stores the rows of chunk in one transaction and marks them
// written once it committed.
func (r *ClientRecorder) write(ctx context.Context, chunk []pending) (int, error) {
	n := 0
	err := r.st.Update(ctx, func(tx store.Tx) error {
		n = 0
		b := tx.Bucket(clientBucket)
		for _, p := range chunk {
			key := rowKey(p.k, r.node)
			var rec clientRecord
			if err := store.GetJSON(b, key, &rec); err == nil && rec.LastSeen.Unix() >= p.seen {
				continue
			}
			rec = clientRecord{Versioned: store.Versioned{Schema: clientSchema}, ClientType: p.k.typ,
				IP: p.k.ip.String(), Node: r.node, LastSeen: time.Unix(p.seen, 0).UTC()}
			if err := store.PutJSON(b, key, rec); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("client applications: %w", err)
	}
	for _, p := range chunk {
		p.e.written = p.seen
	}
	return n, nil
}

// sweep removes the rows of every node not seen within the retention.
func (r *ClientRecorder) sweep(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-r.retention)
	stale := func(v []byte) bool {
		var rec clientRecord
		return json.Unmarshal(v, &rec) == nil && rec.LastSeen.Before(cutoff)
	}
	found := false
	if err := r.st.View(ctx, func(tx store.Tx) error {
		return tx.Bucket(clientBucket).ForEach(nil, func(_, v []byte) error {
			if stale(v) {
				found = true
				return store.ErrStop
			}
			return nil
		})
	}); err != nil {
		return 0, fmt.Errorf("client applications: %w", err)
	}
	if !found {
		return 0, nil
	}
	n := 0
	err := r.st.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = store.DeleteWhere(tx.Bucket(clientBucket), nil, func(_, v []byte) bool { return stale(v) })
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("client applications: %w", err)
	}
	return n, nil
}

// List returns the client applications by client type, each type's
// clients ordered by IP: the stored rows of every node merged with the
// clients this node has not written yet, with the newest last seen of
// each (type, IP). Rows past the retention are left out.
func (r *ClientRecorder) List(ctx context.Context) (map[string][]ClientApp, error) {
	cutoff := r.now().Add(-r.retention).Unix()
	newest := map[clientKey]int64{}
	see := func(k clientKey, seen int64) {
		if seen >= cutoff && seen > newest[k] {
			newest[k] = seen
		}
	}
	err := r.st.View(ctx, func(tx store.Tx) error {
		return tx.Bucket(clientBucket).ForEach(nil, func(k, v []byte) error {
			var rec clientRecord
			err := json.Unmarshal(v, &rec)
			ip, ipErr := netip.ParseAddr(rec.IP)
			if err != nil || ipErr != nil {
				r.log.Error().Str("component", "monitoring").Err(errors.Join(err, ipErr)).
					Bytes("row", bytes.ReplaceAll(k, []byte{0}, []byte{'/'})).Msg("unreadable client application row skipped")
				return nil
			}
			see(clientKey{typ: rec.ClientType, ip: ip}, rec.LastSeen.Unix())
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("client applications: %w", err)
	}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		if m := sh.read.Load(); m != nil {
			for k, e := range *m {
				see(k, e.seen.Load())
			}
		}
		for k, e := range sh.fresh {
			see(k, e.seen.Load())
		}
		sh.mu.Unlock()
	}
	out := map[string][]ClientApp{}
	for k, seen := range newest {
		out[k.typ] = append(out[k.typ], ClientApp{Type: k.typ, IP: k.ip, LastSeen: time.Unix(seen, 0).UTC()})
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b ClientApp) int { return a.IP.Compare(b.IP) })
	}
	return out, nil
}
