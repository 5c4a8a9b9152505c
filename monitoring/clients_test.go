package monitoring_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/monitoring"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// clientClock is a settable clock.
type clientClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clientClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clientClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var clientStart = time.Date(2026, 5, 1, 12, 34, 56, 0, time.UTC)

// clientCountingStore counts the write transactions of a store.
type clientCountingStore struct {
	store.Store
	updates atomic.Int64
}

func (c *clientCountingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.updates.Add(1)
	return c.Store.Update(ctx, fn)
}

type clientLogBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *clientLogBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *clientLogBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func newClientRecorder(t testing.TB, st store.Store, node string, clk *clientClock, mod func(*monitoring.ClientConfig)) *monitoring.ClientRecorder {
	t.Helper()
	cfg := monitoring.ClientConfig{Store: st, Node: node, Now: clk.now}
	if mod != nil {
		mod(&cfg)
	}
	return monitoring.NewClientRecorder(cfg)
}

func clientAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func listClients(t *testing.T, r *monitoring.ClientRecorder) map[string][]monitoring.ClientApp {
	t.Helper()
	got, err := r.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func flushClients(t *testing.T, r *monitoring.ClientRecorder) (int, int) {
	t.Helper()
	w, d, err := r.Flush(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return w, d
}

// show renders a listing compactly: type: ip@seconds-after-start, ...
func showClients(m map[string][]monitoring.ClientApp) string {
	var b strings.Builder
	for _, typ := range sortedClientTypes(m) {
		fmt.Fprintf(&b, "%s:", typ)
		for _, c := range m[typ] {
			if c.Type != typ {
				fmt.Fprintf(&b, " (type %q)", c.Type)
			}
			fmt.Fprintf(&b, " %s@%d", c.IP, int(c.LastSeen.Sub(clientStart).Seconds()))
		}
		b.WriteString("; ")
	}
	return b.String()
}

func sortedClientTypes(m map[string][]monitoring.ClientApp) []string {
	return slices.Sorted(maps.Keys(m))
}

func TestClientType(t *testing.T) {
	long := strings.Repeat("a", monitoring.MaxClientTypeLen-1) + "é" + "tail"
	cases := []struct{ in, want string }{
		{"", "unknown"},
		{"PAM", "PAM"},
		{"privacyidea-cp/2.0 (Windows 10)", "privacyidea-cp/2.0 (Windows 10)"},
		{"a\x00b", "a?b"},
		// The two-byte é would straddle the limit: it is cut before it.
		{long, strings.Repeat("a", monitoring.MaxClientTypeLen-1)},
		{strings.Repeat("x", 1000), strings.Repeat("x", monitoring.MaxClientTypeLen)},
	}
	for _, c := range cases {
		if got := monitoring.ClientType(c.in); got != c.want {
			t.Errorf("ClientType(%.20q) = %.20q (len %d); want %.20q (len %d)", c.in, got, len(got), c.want, len(c.want))
		}
	}
}

func TestClientRecordAndList(t *testing.T) {
	clk := &clientClock{t: clientStart}
	cs := &clientCountingStore{Store: storetest.Open(t)}
	r := newClientRecorder(t, cs, "node1", clk, nil)
	for i := range 50 {
		r.Record("PAM", clientAddr("10.0.0.5"))
		r.Record("privacyidea-cp/2.0", clientAddr("10.0.0.6"))
		if i == 10 {
			clk.add(3 * time.Second)
		}
	}
	r.Record("", netip.Addr{})
	r.Record("PAM", clientAddr("::ffff:10.0.0.7")) // an IPv4-mapped address is the IPv4 one
	r.Record("PAM", clientAddr("fe80::1%eth0"))
	if n := cs.updates.Load(); n != 0 {
		t.Fatalf("Record wrote %d times to the store; want 0", n)
	}
	want := "PAM: 10.0.0.5@3 10.0.0.7@3 fe80::1@3; privacyidea-cp/2.0: 10.0.0.6@3; unknown: 0.0.0.0@3; "
	if got := showClients(listClients(t, r)); got != want {
		t.Errorf("before flush: %s\nwant %s", got, want)
	}
	if w, _ := flushClients(t, r); w != 5 {
		t.Errorf("flush wrote %d rows; want 5", w)
	}
	writes := cs.updates.Load()
	if writes != 1 {
		t.Errorf("flush used %d write transactions; want 1", writes)
	}
	if got := showClients(listClients(t, r)); got != want {
		t.Errorf("after flush: %s\nwant %s", got, want)
	}
	// Nothing moved: the next flush writes nothing.
	if w, _ := flushClients(t, r); w != 0 || cs.updates.Load() != writes {
		t.Errorf("idle flush wrote %d rows in %d transactions; want none", w, cs.updates.Load()-writes)
	}
	// Another second: only the client seen again is written.
	clk.add(time.Minute)
	r.Record("PAM", clientAddr("10.0.0.5"))
	if w, _ := flushClients(t, r); w != 1 {
		t.Errorf("flush after one client came back wrote %d rows; want 1", w)
	}
	// A new recorder on the same store (a restart) reads the rows.
	r2 := newClientRecorder(t, cs, "node1", clk, nil)
	want = "PAM: 10.0.0.5@63 10.0.0.7@3 fe80::1@3; privacyidea-cp/2.0: 10.0.0.6@3; unknown: 0.0.0.0@3; "
	if got := showClients(listClients(t, r2)); got != want {
		t.Errorf("after restart: %s\nwant %s", got, want)
	}
}

func TestClientNodesShareTheStore(t *testing.T) {
	clk := &clientClock{t: clientStart}
	st := storetest.Open(t)
	a := newClientRecorder(t, st, "node-a", clk, nil)
	b := newClientRecorder(t, st, "node-b", clk, nil)
	a.Record("PAM", clientAddr("10.0.0.5"))
	b.Record("PAM", clientAddr("10.0.0.6"))
	clk.add(10 * time.Second)
	b.Record("PAM", clientAddr("10.0.0.5"))
	flushClients(t, b)
	clk.add(10 * time.Second)
	flushClients(t, a) // node-a's older row must not overwrite node-b's
	want := "PAM: 10.0.0.5@10 10.0.0.6@0; "
	for name, r := range map[string]*monitoring.ClientRecorder{"a": a, "b": b} {
		if got := showClients(listClients(t, r)); got != want {
			t.Errorf("node %s lists %s; want %s", name, got, want)
		}
	}
	rows := 0
	if err := st.View(t.Context(), func(tx store.Tx) error {
		return tx.Bucket("clientapps").ForEach(nil, func(k, v []byte) error {
			rows++
			if !strings.Contains(string(v), `"schema":1`) {
				t.Errorf("row %q without schema: %s", k, v)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if rows != 3 {
		t.Errorf("%d rows stored; want 3 (one per client and node)", rows)
	}
	// node-a sees 10.0.0.5 again: its own not yet flushed sighting is
	// the newest and wins over node-b's row.
	clk.add(5 * time.Second)
	a.Record("PAM", clientAddr("10.0.0.5"))
	if got, want := showClients(listClients(t, a)), "PAM: 10.0.0.5@25 10.0.0.6@0; "; got != want {
		t.Errorf("node a lists %s; want %s", got, want)
	}
}

func TestClientRetention(t *testing.T) {
	clk := &clientClock{t: clientStart}
	st := storetest.Open(t)
	r := newClientRecorder(t, st, "n1", clk, func(c *monitoring.ClientConfig) { c.Retention = 48 * time.Hour })
	r.Record("old", clientAddr("10.0.0.1"))
	r.Record("kept", clientAddr("10.0.0.2"))
	if w, d := flushClients(t, r); w != 2 || d != 0 {
		t.Fatalf("flush = %d written, %d removed; want 2, 0", w, d)
	}
	// A row another node wrote long ago goes too.
	other := newClientRecorder(t, st, "n2", clk, nil)
	other.Record("other", clientAddr("10.0.0.3"))
	flushClients(t, other)
	clk.add(47 * time.Hour)
	r.Record("kept", clientAddr("10.0.0.2"))
	if w, d := flushClients(t, r); w != 1 || d != 0 {
		t.Errorf("flush within retention = %d written, %d removed; want 1, 0", w, d)
	}
	clk.add(2 * time.Hour)
	// Past the retention the row is not listed even before a sweep.
	if got, want := showClients(listClients(t, r)), "kept: 10.0.0.2@169200; "; got != want {
		t.Errorf("listed %s; want %s", got, want)
	}
	if _, d := flushClients(t, r); d != 2 {
		t.Errorf("flush past retention removed %d rows; want 2", d)
	}
	if got, want := showClients(listClients(t, newClientRecorder(t, st, "n3", clk, nil))), "kept: 10.0.0.2@169200; "; got != want {
		t.Errorf("after the sweep the store lists %s; want %s", got, want)
	}
}

func TestClientLimit(t *testing.T) {
	clk := &clientClock{t: clientStart}
	logs := &clientLogBuf{}
	r := newClientRecorder(t, storetest.Open(t), "n1", clk, func(c *monitoring.ClientConfig) {
		c.Limit = 3
		c.Log = zerolog.New(logs)
	})
	for i := range 10 {
		r.Record("PAM", clientAddr(fmt.Sprintf("10.0.0.%d", i)))
	}
	if r.Len() != 3 || r.Dropped() != 7 {
		t.Errorf("Len %d, Dropped %d; want 3, 7", r.Len(), r.Dropped())
	}
	if n := strings.Count(logs.String(), "recorder is full"); n != 1 {
		t.Errorf("%d log lines about the full recorder in the same minute; want 1:\n%s", n, logs.String())
	}
	// A known client is still recorded while full.
	clk.add(5 * time.Second)
	r.Record("PAM", clientAddr("10.0.0.0"))
	if got, want := showClients(listClients(t, r)), "PAM: 10.0.0.0@5 10.0.0.1@0 10.0.0.2@0; "; got != want {
		t.Errorf("listed %s; want %s", got, want)
	}
	clk.add(time.Minute)
	r.Record("PAM", clientAddr("10.0.0.8"))
	if n := strings.Count(logs.String(), "recorder is full"); n != 2 {
		t.Errorf("%d log lines a minute later; want 2", n)
	}
	// Written and idle for an hour: forgotten in memory, kept in the
	// store, and there is room again.
	flushClients(t, r)
	clk.add(2 * time.Hour)
	flushClients(t, r)
	if r.Len() != 0 {
		t.Errorf("Len after idle flush = %d; want 0", r.Len())
	}
	r.Record("PAM", clientAddr("10.0.0.9"))
	if r.Len() != 1 {
		t.Errorf("Len = %d; want 1", r.Len())
	}
	if got, want := showClients(listClients(t, r)), "PAM: 10.0.0.0@5 10.0.0.1@0 10.0.0.2@0 10.0.0.9@7265; "; got != want {
		t.Errorf("listed %s; want %s", got, want)
	}
}

// TestClientConcurrent records from 32 goroutines while flushing; every
// client ends up listed and stored with its last sighting.
func TestClientConcurrent(t *testing.T) {
	clk := &clientClock{t: clientStart}
	st := storetest.Open(t)
	r := newClientRecorder(t, st, "n1", clk, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	flushed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				_, _, err := r.Flush(context.Background())
				flushed <- err
				return
			default:
				if _, _, err := r.Flush(context.Background()); err != nil {
					flushed <- err
					return
				}
				clk.add(time.Second)
			}
		}
	}()
	for g := range 32 {
		wg.Go(func() {
			for i := range 2000 {
				r.Record(fmt.Sprintf("agent-%d", g%4), clientAddr(fmt.Sprintf("10.0.%d.%d", g, i%16)))
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	last := clk.now().Unix()
	got := listClients(t, newClientRecorder(t, st, "other", clk, nil))
	n := 0
	for _, l := range got {
		n += len(l)
		for _, c := range l {
			if c.LastSeen.Unix() > last {
				t.Errorf("%v seen in the future", c)
			}
		}
	}
	if n != 32*16 || len(got) != 4 {
		t.Errorf("%d clients in %d types stored; want %d in 4", n, len(got), 32*16)
	}
}

// BenchmarkClientRecord measures Record for known clients under parallel
// callers (run with -cpu 1,2): the path of every validate request.
func BenchmarkClientRecord(b *testing.B) {
	// The real clock, as in production.
	r := monitoring.NewClientRecorder(monitoring.ClientConfig{Store: storetest.Open(b), Node: "n1"})
	uas := []string{"PAM", "privacyidea-cp/2.0 (Windows 10.0)", "FreeRADIUS", "simpleSAMLphp"}
	ips := make([]netip.Addr, 64)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{10, 0, byte(i / 8), byte(i)})
	}
	for _, ua := range uas {
		for _, a := range ips {
			r.Record(ua, a)
		}
	}
	if _, _, err := r.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Uint32
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7
		for pb.Next() {
			r.Record(uas[i%len(uas)], ips[i%len(ips)])
			i++
		}
	})
}
