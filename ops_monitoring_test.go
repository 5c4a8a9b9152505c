package authsrv_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// statsClock is a settable clock for the statistics tests.
type statsClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *statsClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *statsClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func statsServer(t *testing.T, opts ...authsrv.Option) (*authsrv.Server, *statsClock) {
	t.Helper()
	clk := &statsClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	key := []byte(strings.Repeat("k", 32))
	s, err := authsrv.New(append([]authsrv.Option{authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(key),
		authsrv.WithJWTKey(key), cheapKDF, authsrv.WithClock(clk.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

func enrollForStats(t *testing.T, s *authsrv.Server) {
	t.Helper()
	alice := user.User{Login: "alice", Realm: "realm1", Resolver: "res", UID: "1"}
	key := token.Params{"otpkey": "3132333435363738393031323334353637383930"}
	for _, r := range []token.InitRequest{
		{Serial: "S1", Params: key}, {Serial: "S2", Params: key, Owner: &alice},
		{Serial: "H1", Params: key, Kind: token.KindHardware},
	} {
		if _, _, err := s.Tokens().Init(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecordStats: one recording writes the six SimpleStats keys and the
// event counters at the clock's time, and the operations read them.
func TestRecordStats(t *testing.T) {
	s, clk := statsServer(t)
	ctx := t.Context()
	admin := caller.Caller{Role: caller.Admin, Name: "admin"}
	if keys, err := s.Ops().MonitoringKeys(ctx, admin); err != nil || len(keys) != 0 {
		t.Fatalf("keys before recording: %q %v", keys, err)
	}
	enrollForStats(t, s)
	if _, err := s.Events().AddCounter(ctx, "logins", 5, false); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordStats(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Ops().MonitoringKeys(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"assigned_tokens", "hardware_tokens", "logins", "software_tokens", "total_tokens", "unassigned_hardware_tokens", "user_with_token"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	for key, v := range map[string]int64{"total_tokens": 3, "hardware_tokens": 1, "software_tokens": 2,
		"unassigned_hardware_tokens": 1, "assigned_tokens": 1, "user_with_token": 1, "logins": 5} {
		ps, err := s.Ops().MonitoringValues(ctx, admin, key, time.Time{}, time.Time{})
		if err != nil || len(ps) != 1 || ps[0].Value != v || !ps[0].Time.Equal(clk.now()) {
			t.Errorf("%s: %v %v, want one point %d at %v", key, ps, err, v, clk.now())
		}
		last, ok, err := s.Ops().MonitoringLast(ctx, admin, key)
		if err != nil || !ok || last != v {
			t.Errorf("%s last: %d %v %v", key, last, ok, err)
		}
	}
	if _, ok, err := s.Ops().MonitoringLast(ctx, admin, "nosuchkey"); ok || err != nil {
		t.Errorf("last of an unknown key: %v %v", ok, err)
	}
	// A later recording adds a point.
	clk.set(clk.now().Add(5 * time.Minute))
	if _, _, err := s.Tokens().Init(ctx, token.InitRequest{Serial: "S3", Params: token.Params{"genkey": "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordStats(ctx); err != nil {
		t.Fatal(err)
	}
	ps, _ := s.Ops().MonitoringValues(ctx, admin, "total_tokens", time.Time{}, time.Time{})
	if len(ps) != 2 || ps[0].Value != 3 || ps[1].Value != 4 {
		t.Errorf("total_tokens %v", ps)
	}
}

// TestMonitoringRights: reads need statistics_read, the DELETE
// statistics_delete; a refused DELETE deletes nothing; a user is refused;
// the DELETE's audit entry names the key and the window.
func TestMonitoringRights(t *testing.T) {
	s, clk := statsServer(t)
	ctx := t.Context()
	for i := range 3 {
		if err := s.Stats().Add(ctx, "k", clk.now().Add(time.Duration(i)*time.Hour), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	bob := caller.Caller{Role: caller.Admin, Name: "bob", RequestID: "stats-test"}
	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "only-read", Scope: policy.ScopeAdmin, Action: "statistics_read",
		AdminUser: []string{"bob"}, Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().MonitoringValues(ctx, bob, "k", time.Time{}, time.Time{}); err != nil {
		t.Errorf("read with statistics_read: %v", err)
	}
	_, err := s.Ops().DeleteMonitoring(ctx, bob, "k", time.Time{}, time.Time{})
	if !apierr.Is(err, apierr.Policy) || !strings.Contains(err.Error(), "statistics_delete") {
		t.Errorf("delete without statistics_delete: %v", err)
	}
	if ps, _ := s.Stats().Range(ctx, "k", time.Time{}, time.Time{}); len(ps) != 3 {
		t.Errorf("a refused delete removed points: %d left", len(ps))
	}
	carol := caller.Caller{Role: caller.Admin, Name: "carol"}
	for name, op := range map[string]func() error{
		"keys": func() error { _, err := s.Ops().MonitoringKeys(ctx, carol); return err },
		"values": func() error {
			_, err := s.Ops().MonitoringValues(ctx, carol, "k", time.Time{}, time.Time{})
			return err
		},
		"last": func() error { _, _, err := s.Ops().MonitoringLast(ctx, carol, "k"); return err },
	} {
		if err := op(); !apierr.Is(err, apierr.Policy) || !strings.Contains(err.Error(), "statistics_read") {
			t.Errorf("%s without statistics_read: %v", name, err)
		}
	}
	user := caller.Caller{Role: caller.User, Name: "alice", Realm: "realm1"}
	if _, err := s.Ops().MonitoringKeys(ctx, user); err == nil {
		t.Error("a user read the statistics keys")
	}
	if _, err := s.Ops().DeleteMonitoring(ctx, user, "k", time.Time{}, time.Time{}); err == nil {
		t.Error("a user deleted statistics")
	}

	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "bob-delete", Scope: policy.ScopeAdmin, Action: "statistics_delete",
		AdminUser: []string{"bob"}, Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	start, end := clk.now().Add(30*time.Minute), clk.now().Add(3*time.Hour)
	n, err := s.Ops().DeleteMonitoring(ctx, bob, "k", start, end)
	if err != nil || n != 2 {
		t.Fatalf("DeleteMonitoring = %d %v, want 2", n, err)
	}
	res, err := s.Audit().Search(ctx, audit.Query{Filters: map[string]string{"action": "DELETE /monitoring/k", "success": "1"}, PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, row := range res.Rows {
		info, _ := row["info"].(string)
		if row["administrator"] == "bob" && strings.Contains(info, "key: k, start: 2026-05-01 12:30:00.000000+0000, end: 2026-05-01 15:00:00.000000+0000") {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit entry of the delete: %+v", res.Rows)
	}
}

func TestMonitoringDateOp(t *testing.T) {
	s, _ := statsServer(t, authsrv.WithLocation(time.FixedZone("", 2*3600)))
	got, err := s.Ops().MonitoringDate("start", "2026-05-01 12:00")
	if err != nil || !got.Equal(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("naive date: %v %v", got, err)
	}
	if _, err := s.Ops().MonitoringDate("end", "tomorrow"); !apierr.Is(err, apierr.Parameter) || !strings.Contains(err.Error(), "end") {
		t.Errorf("bad date: %v", err)
	}
}

func TestStatsOptions(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	for _, c := range []struct {
		opt  authsrv.Option
		want string
	}{
		{authsrv.WithStatsInterval(30 * time.Second), "statistics interval"},
		{authsrv.WithStatsInterval(-time.Minute), "statistics interval"},
		{authsrv.WithStatsRetention(-time.Hour), "statistics retention"},
		{authsrv.WithLocation(nil), "location"},
	} {
		_, err := authsrv.New(authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New = %v, want an error about %s", err, c.want)
		}
	}
	for _, opt := range []authsrv.Option{authsrv.WithStatsInterval(0), authsrv.WithStatsInterval(time.Hour), authsrv.WithStatsRetention(0)} {
		s, err := authsrv.New(authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), cheapKDF, opt)
		if err != nil {
			t.Errorf("New: %v", err)
			continue
		}
		_ = s.Close()
	}
}

// TestRunRecordsStats: Run records every interval (fake time), and two
// servers on one store record once per interval between them.
func TestRunRecordsStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := storetest.Open(t)
		key := []byte(strings.Repeat("k", 32))
		var servers []*authsrv.Server
		for _, node := range []string{"node1", "node2"} {
			s, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), cheapKDF,
				authsrv.WithNodeName(node), authsrv.WithStatsInterval(5*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			servers = append(servers, s)
		}
		enrollForStats(t, servers[0])
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		// node2 starts a minute later: its ticks fall a minute after
		// node1's, within the interval node1 just recorded.
		wg.Go(func() { _ = servers[0].Run(ctx) })
		time.Sleep(time.Minute)
		wg.Go(func() { _ = servers[1].Run(ctx) })
		time.Sleep(15*time.Minute + 30*time.Second)
		synctest.Wait()
		ps, err := servers[1].Stats().Range(t.Context(), "total_tokens", time.Time{}, time.Time{})
		cancel()
		wg.Wait()
		for _, s := range servers {
			_ = s.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 3 {
			t.Fatalf("%d points after three intervals, want 3: %v", len(ps), ps)
		}
		for _, p := range ps {
			if p.Value != 3 {
				t.Errorf("point %v, want 3 tokens", p)
			}
		}
	})
}

// TestRecordStatsCounterReset: with the reset, each point is the count
// of one interval and the counter starts again from what came after the
// reading; a counter named like a token statistic is neither recorded nor
// reset.
func TestRecordStatsCounterReset(t *testing.T) {
	s, clk := statsServer(t, authsrv.WithStatsCounterReset(true))
	ctx := t.Context()
	for name, n := range map[string]int64{"logins": 5, "total_tokens": 7} {
		if _, err := s.Events().AddCounter(ctx, name, n, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordStats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events().AddCounter(ctx, "logins", 2, false); err != nil {
		t.Fatal(err)
	}
	clk.set(clk.now().Add(5 * time.Minute))
	if err := s.RecordStats(ctx); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Stats().Range(ctx, "logins", time.Time{}, time.Time{})
	if err != nil || len(ps) != 2 || ps[0].Value != 5 || ps[1].Value != 2 {
		t.Errorf("logins points %v %v, want 5 then 2", ps, err)
	}
	counters, err := s.Events().Counters(ctx)
	if err != nil || counters["logins"] != 0 || counters["total_tokens"] != 7 {
		t.Errorf("counters after recording: %v %v", counters, err)
	}
	if ps, _ := s.Stats().Range(ctx, "total_tokens", time.Time{}, time.Time{}); len(ps) != 2 || ps[0].Value != 0 {
		t.Errorf("total_tokens holds the token count, not the counter: %v", ps)
	}
}
