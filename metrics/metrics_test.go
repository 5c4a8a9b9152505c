package metrics_test

import (
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/metrics"
)

func TestLabelValues(t *testing.T) {
	want := map[metrics.Endpoint]string{metrics.Check: "check", metrics.SAMLCheck: "samlcheck",
		metrics.RadiusCheck: "radiuscheck", metrics.TriggerChallenge: "triggerchallenge", metrics.PollTransaction: "polltransaction"}
	if got := len(metrics.Endpoints()); got != len(want) {
		t.Fatalf("Endpoints() has %d, want %d", got, len(want))
	}
	for _, e := range metrics.Endpoints() {
		if e.String() != want[e] {
			t.Errorf("endpoint %d = %q, want %q", e, e.String(), want[e])
		}
	}
	results := map[metrics.Result]string{metrics.Accept: "accept", metrics.Reject: "reject",
		metrics.Challenge: "challenge", metrics.Error: "error"}
	if got := len(metrics.Results()); got != len(results) {
		t.Fatalf("Results() has %d, want %d", got, len(results))
	}
	for _, r := range metrics.Results() {
		if r.String() != results[r] {
			t.Errorf("result %d = %q, want %q", r, r.String(), results[r])
		}
	}
	if metrics.NumEndpoints.String() != "unknown" || metrics.NumResults.String() != "unknown" {
		t.Error("out-of-range values must not name a real label")
	}
}

func TestIsNop(t *testing.T) {
	for name, tc := range map[string]struct {
		s    metrics.Sink
		want bool
	}{
		"nil":     {nil, true},
		"Nop":     {metrics.Nop{}, true},
		"*Nop":    {&metrics.Nop{}, true},
		"*Memory": {new(metrics.Memory), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := metrics.IsNop(tc.s); got != tc.want {
				t.Errorf("IsNop = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMemoryCounts(t *testing.T) {
	var m metrics.Memory
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				m.ValidateRequest(metrics.Check, metrics.Accept)
				m.ValidateRequest(metrics.RadiusCheck, metrics.Challenge)
			}
		})
	}
	wg.Wait()
	m.ValidateRequest(metrics.NumEndpoints, metrics.Accept) // ignored
	if got := m.Validate(metrics.Check, metrics.Accept); got != 800 {
		t.Errorf("check/accept = %d, want 800", got)
	}
	if got := m.Validate(metrics.RadiusCheck, metrics.Challenge); got != 800 {
		t.Errorf("radiuscheck/challenge = %d, want 800", got)
	}
	if got := m.Validate(metrics.Check, metrics.Reject); got != 0 {
		t.Errorf("check/reject = %d, want 0", got)
	}

	o := m.Route("/token/:serial", "GET")
	if again := m.Route("/token/:serial", "GET"); again != o {
		t.Error("a route registered twice must share its series")
	}
	o.Observe(200, 2*time.Millisecond)
	o.Observe(200, 4*time.Millisecond)
	o.Observe(404, time.Millisecond)
	if got := m.Requests("/token/:serial", "GET", 200); got != 2 {
		t.Errorf("200 = %d, want 2", got)
	}
	if got := m.Requests("/token/:serial", "GET", 404); got != 1 {
		t.Errorf("404 = %d, want 1", got)
	}
	if got := m.Requests("/token/:serial", "POST", 200); got != 0 {
		t.Errorf("POST = %d, want 0", got)
	}
	if d := m.RouteTimes("/token/:serial", "GET"); d.Count != 3 || d.Total != 7*time.Millisecond || d.Max != 4*time.Millisecond {
		t.Errorf("route times = %+v", d)
	}
	if len(m.Routes()) != 1 {
		t.Errorf("routes = %v", m.Routes())
	}

	m.KDFQueueWait(0)
	m.KDFQueueWait(3 * time.Millisecond)
	if d := m.KDFWaits(); d.Count != 2 || d.Max != 3*time.Millisecond {
		t.Errorf("kdf waits = %+v", d)
	}
	m.StoreCommit(5 * time.Millisecond)
	if d := m.StoreCommits(); d.Count != 1 || d.Total != 5*time.Millisecond {
		t.Errorf("commits = %+v", d)
	}
}
