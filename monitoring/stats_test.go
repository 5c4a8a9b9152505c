package monitoring_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/monitoring"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newStats(t *testing.T, ret monitoring.Retention) (*monitoring.Stats, store.Store) {
	t.Helper()
	st := storetest.Open(t)
	return monitoring.NewStats(st, ret), st
}

func values(ps []monitoring.Point) []int64 {
	out := []int64{}
	for _, p := range ps {
		out = append(out, p.Value)
	}
	return out
}

func TestStatsSeries(t *testing.T) {
	s, _ := newStats(t, monitoring.DefaultRetention())
	ctx := t.Context()
	// "a" is a prefix of "ab" and "a b": the series must not mix.
	for i, key := range []string{"a", "ab", "a b", "total_tokens"} {
		for h := range 4 {
			if err := s.Add(ctx, key, t0.Add(time.Duration(h)*time.Hour), int64(10*i+h)); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "a b", "ab", "total_tokens"}; !slices.Equal(keys, want) {
		t.Errorf("Keys = %q, want %q", keys, want)
	}
	cases := []struct {
		name       string
		key        string
		start, end time.Time
		want       []int64
	}{
		{"all", "ab", time.Time{}, time.Time{}, []int64{10, 11, 12, 13}},
		{"inclusive window", "ab", t0.Add(time.Hour), t0.Add(2 * time.Hour), []int64{11, 12}},
		{"open end", "a", t0.Add(90 * time.Minute), time.Time{}, []int64{2, 3}},
		{"open start", "a b", time.Time{}, t0, []int64{20}},
		{"start in another zone", "a", t0.In(time.FixedZone("", 2*3600)).Add(3 * time.Hour), time.Time{}, []int64{3}},
		{"empty window", "a", t0.Add(5 * time.Hour), time.Time{}, []int64{}},
		{"unknown key", "nope", time.Time{}, time.Time{}, []int64{}},
		{"invalid key", "", time.Time{}, time.Time{}, []int64{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Range(ctx, c.key, c.start, c.end)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(values(got), c.want) {
				t.Errorf("Range = %v, want %v", values(got), c.want)
			}
			for i := 1; i < len(got); i++ {
				if !got[i].Time.After(got[i-1].Time) {
					t.Errorf("not ascending: %v", got)
				}
			}
		})
	}
	for _, c := range []struct {
		key  string
		want int64
		ok   bool
	}{{"a", 3, true}, {"ab", 13, true}, {"total_tokens", 33, true}, {"nope", 0, false}, {"a\x00", 0, false}} {
		p, ok, err := s.Last(ctx, c.key)
		if err != nil || ok != c.ok || p.Value != c.want {
			t.Errorf("Last(%q) = %v %v %v, want %d %v", c.key, p, ok, err, c.want, c.ok)
		}
		if ok && !p.Time.Equal(t0.Add(3*time.Hour)) {
			t.Errorf("Last(%q) at %v", c.key, p.Time)
		}
	}
	// The same microsecond replaces the value.
	if err := s.Add(ctx, "a", t0, 99); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Range(ctx, "a", t0, t0); !slices.Equal(values(got), []int64{99}) {
		t.Errorf("replaced point = %v", values(got))
	}
}

func TestStatsBadKey(t *testing.T) {
	s, _ := newStats(t, monitoring.DefaultRetention())
	for _, key := range []string{"", "a\x00b", "tab\there", strings.Repeat("k", monitoring.MaxStatsKeyLen+1), "\xff"} {
		err := s.Add(t.Context(), key, t0, 1)
		if !errors.Is(err, monitoring.ErrStatsKey) || !apierr.Is(err, apierr.Parameter) {
			t.Errorf("Add(%q) = %v, want ErrStatsKey", key, err)
		}
	}
	if keys, _ := s.Keys(t.Context()); len(keys) != 0 {
		t.Errorf("keys after refused adds: %q", keys)
	}
	if !monitoring.ValidStatsKey(strings.Repeat("k", monitoring.MaxStatsKeyLen)) || !monitoring.ValidStatsKey("Zähler 1") {
		t.Error("valid keys refused")
	}
}

func TestStatsDelete(t *testing.T) {
	ctx := t.Context()
	fill := func(t *testing.T) *monitoring.Stats {
		s, _ := newStats(t, monitoring.DefaultRetention())
		for _, key := range []string{"k", "other"} {
			var ps []monitoring.Point
			for h := range 10 {
				ps = append(ps, monitoring.Point{Time: t0.Add(time.Duration(h) * time.Hour), Value: int64(h)})
			}
			if err := s.AddPoints(ctx, key, ps); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	t.Run("window", func(t *testing.T) {
		s := fill(t)
		hooked := 0
		n, err := s.Delete(ctx, "k", t0.Add(2*time.Hour), t0.Add(5*time.Hour), func(tx store.Tx) error {
			hooked++
			return tx.Bucket("test.hook").Put([]byte("x"), []byte("1"))
		})
		if err != nil || n != 4 {
			t.Fatalf("Delete = %d %v, want 4", n, err)
		}
		if hooked == 0 {
			t.Error("the hook did not run")
		}
		if got, _ := s.Range(ctx, "k", time.Time{}, time.Time{}); !slices.Equal(values(got), []int64{0, 1, 6, 7, 8, 9}) {
			t.Errorf("left %v", values(got))
		}
		if got, _ := s.Range(ctx, "other", time.Time{}, time.Time{}); len(got) != 10 {
			t.Errorf("other series lost points: %d left", len(got))
		}
	})
	t.Run("all, then the key is gone", func(t *testing.T) {
		s := fill(t)
		if n, err := s.Delete(ctx, "k", time.Time{}, time.Time{}); err != nil || n != 10 {
			t.Fatalf("Delete = %d %v, want 10", n, err)
		}
		if keys, _ := s.Keys(ctx); !slices.Equal(keys, []string{"other"}) {
			t.Errorf("keys %q", keys)
		}
		if n, err := s.Delete(ctx, "k", time.Time{}, time.Time{}); err != nil || n != 0 {
			t.Errorf("second Delete = %d %v, want 0", n, err)
		}
	})
	t.Run("a failing hook deletes nothing", func(t *testing.T) {
		s := fill(t)
		boom := errors.New("boom")
		if _, err := s.Delete(ctx, "k", time.Time{}, time.Time{}, func(store.Tx) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("Delete = %v", err)
		}
		if got, _ := s.Range(ctx, "k", time.Time{}, time.Time{}); len(got) != 10 {
			t.Errorf("%d points left, want 10", len(got))
		}
	})
}

func TestStatsRecord(t *testing.T) {
	s, _ := newStats(t, monitoring.DefaultRetention())
	ctx := t.Context()
	vals := map[string]int64{"total_tokens": 3, "bad\x00key": 1}
	for _, c := range []struct {
		at   time.Time
		want bool
	}{
		{t0, true},
		{t0.Add(time.Minute), false},             // within the gap: another node recorded
		{t0.Add(-time.Minute), false},            // a clock a little behind
		{t0.Add(3 * time.Minute), true},          // the next interval
		{t0.Add(-time.Hour), true},               // a clock set back far
		{t0.Add(-time.Hour + time.Second), true}, // no gap asked
	} {
		gap := 2 * time.Minute
		if c.at.Equal(t0.Add(-time.Hour + time.Second)) {
			gap = 0
		}
		ok, err := s.Record(ctx, c.at, vals, gap)
		if err != nil || ok != c.want {
			t.Errorf("Record at %v = %v %v, want %v", c.at, ok, err, c.want)
		}
	}
	keys, _ := s.Keys(ctx)
	if !slices.Equal(keys, []string{"total_tokens"}) {
		t.Errorf("keys %q", keys)
	}
	if got, _ := s.Range(ctx, "total_tokens", time.Time{}, time.Time{}); len(got) != 4 {
		t.Errorf("%d points, want 4", len(got))
	}
}

// TestStatsRetentionBound: a series of 10-minute points over 200 days is
// thinned to every point of the last week, one per hour to 90 days, one
// per day to the maximum age, and nothing older; the result does not
// depend on how many points a transaction visits, and a second run
// changes nothing.
func TestStatsRetentionBound(t *testing.T) {
	ret := monitoring.Retention{Raw: 7 * 24 * time.Hour, Hourly: 90 * 24 * time.Hour, MaxAge: 150 * 24 * time.Hour}
	now := t0
	const step = 10 * time.Minute
	var ps []monitoring.Point
	for at := now.Add(-200 * 24 * time.Hour); !at.After(now); at = at.Add(step) {
		ps = append(ps, monitoring.Point{Time: at, Value: at.Unix()})
	}
	results := map[int][]monitoring.Point{}
	for _, batch := range []int{97, 100000} {
		s, _ := newStats(t, ret)
		monitoring.SetPruneBatch(s, batch)
		ctx := t.Context()
		if err := s.AddPoints(ctx, "k", ps); err != nil {
			t.Fatal(err)
		}
		n, err := s.Prune(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Range(ctx, "k", time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if n != len(ps)-len(got) {
			t.Errorf("batch %d: Prune reported %d deleted, %d are gone", batch, n, len(ps)-len(got))
		}
		results[batch] = got
		if n, err := s.Prune(ctx, now); err != nil || n != 0 {
			t.Errorf("batch %d: second Prune = %d %v, want 0", batch, n, err)
		}
	}
	got := results[97]
	if !slices.Equal(got, results[100000]) {
		t.Fatal("the result depends on the transaction size")
	}
	raw, hourly, daily := now.Add(-ret.Raw), now.Add(-ret.Hourly), now.Add(-ret.MaxAge)
	bound := int(ret.Raw/step) + 1 + int((ret.Hourly-ret.Raw)/time.Hour) + 1 + int((ret.MaxAge-ret.Hourly)/(24*time.Hour)) + 1
	if len(got) > bound {
		t.Errorf("%d points kept, bound %d", len(got), bound)
	}
	slots := map[string]int{}
	nRaw := 0
	for _, p := range got {
		switch {
		case p.Time.Before(daily):
			t.Errorf("point at %v is older than the maximum age", p.Time)
		case p.Time.Before(hourly):
			slots["d"+p.Time.Truncate(24*time.Hour).String()]++
		case p.Time.Before(raw):
			slots["h"+p.Time.Truncate(time.Hour).String()]++
		default:
			nRaw++
		}
		if p.Value != p.Time.Unix() {
			t.Errorf("point at %v has value %d", p.Time, p.Value)
		}
	}
	for slot, n := range slots {
		if n != 1 {
			t.Errorf("slot %s keeps %d points, want 1", slot, n)
		}
	}
	if want := int(ret.Raw/step) + 1; nRaw != want {
		t.Errorf("%d points of the last week kept, want all %d", nRaw, want)
	}
	// Every hour of the hourly tier is represented, by its newest point.
	if n := len(slots); n < int((ret.Hourly-ret.Raw)/time.Hour)+int((ret.MaxAge-ret.Hourly)/(24*time.Hour)) {
		t.Errorf("only %d slots kept", n)
	}
	for _, p := range got {
		if p.Time.Before(raw) && !p.Time.Before(hourly) && p.Time.Minute() != 50 {
			t.Errorf("hour %v kept the point at minute %d, want the newest (50)", p.Time.Truncate(time.Hour), p.Time.Minute())
			break
		}
	}
}

func TestStatsMaxPoints(t *testing.T) {
	ret := monitoring.DefaultRetention()
	ret.MaxPoints = 100
	s, _ := newStats(t, ret)
	monitoring.SetPruneBatch(s, 33)
	ctx := t.Context()
	var ps []monitoring.Point
	for i := range 300 {
		ps = append(ps, monitoring.Point{Time: t0.Add(time.Duration(i-300) * time.Second), Value: int64(i)})
	}
	if err := s.AddPoints(ctx, "burst", ps); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "small", t0, 1); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, t0)
	if err != nil || n != 200 {
		t.Fatalf("Prune = %d %v, want 200", n, err)
	}
	got, _ := s.Range(ctx, "burst", time.Time{}, time.Time{})
	if len(got) != 100 || got[0].Value != 200 || got[99].Value != 299 {
		t.Errorf("kept %d points from %v", len(got), got[:min(len(got), 1)])
	}
	if got, _ := s.Range(ctx, "small", time.Time{}, time.Time{}); len(got) != 1 {
		t.Errorf("small series: %d points", len(got))
	}
}

func TestRetentionValidate(t *testing.T) {
	if err := monitoring.DefaultRetention().Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
	for _, r := range []monitoring.Retention{
		{Raw: 0, Hourly: time.Hour},
		{Raw: 2 * time.Hour, Hourly: time.Hour},
		{Raw: time.Hour, Hourly: time.Hour, MaxAge: -1},
		{Raw: time.Hour, Hourly: time.Hour, MaxPoints: -1},
	} {
		if r.Validate() == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}
