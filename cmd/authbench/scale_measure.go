package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ---- validate by user ----

// validateUser sends one /validate/check for user i with its next OTP and
// advances the counter unless the server refused the value.
func (r *sizeRun) validateUser(ctx context.Context, i int, gen *hotpGen) (outcome, string, time.Duration) {
	if gen == nil {
		gen = newHOTP(scaleKey(scaleSerial(i)), otpDigits)
	}
	form := encodeForm(url.Values{"user": {scaleLogin(i)}, "realm": {scaleRealm}, "pass": {gen.At(r.counters[i])}})
	t0 := time.Now()
	o, msg := postCheck(ctx, r.hc, r.cfg.timeout, r.base, form, true)
	lat := time.Since(t0)
	if o != outValue {
		r.counters[i]++
	}
	return o, msg, lat
}

// lookupUser is the user of the j-th lookup: a stride through all N.
func lookupUser(j, n int) int { return 1 + (j*7919+13)%n }

// lookups sends cfg.lookups validate requests one after another, each
// for another user, right after the start: the first finds the resolver
// cold.
func (r *sizeRun) lookups(ctx context.Context) {
	n := r.cfg.lookups
	lat := make([]time.Duration, 0, n)
	for j := range n {
		o, msg, d := r.validateUser(ctx, lookupUser(j, r.n), nil)
		if o == outCancelled || ctx.Err() != nil {
			return
		}
		if o != outOK {
			r.fail("lookup %d (%s): %s", j+1, scaleLogin(lookupUser(j, r.n)), msg)
			return
		}
		lat = append(lat, d)
	}
	f := &lookupFig{Count: n, FirstMS: ms(lat[0]), LastMS: ms(lat[n-1])}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	f.MedianMS = ms(percentile(sorted, 50))
	r.res.Lookups = f
	r.logf("first lookup %.1f ms, lookup %d %.1f ms (median %.1f ms)", f.FirstMS, n, f.LastMS, f.MedianMS)
}

// ---- validate load ----

// workingSet is the users of the validate load: min(N, -working-set),
// spread evenly over 1..N.
func (r *sizeRun) workingSet() []int {
	ws := min(r.n, r.cfg.workingSet)
	out := make([]int, ws)
	for j := range ws {
		out[j] = 1 + int(int64(j)*int64(r.n)/int64(ws))
	}
	return out
}

// validate runs the load with clients goroutines for -validate-duration.
func (r *sizeRun) validate(ctx context.Context, clients int) {
	users := r.workingSet()
	clients = min(clients, len(users))
	r.logf("validate: %d clients over %d users for %s", clients, len(users), r.cfg.validateFor)
	end := time.Now().Add(r.cfg.validateFor)
	tallies := make([]tally, clients)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		var own []int
		for j := w; j < len(users); j += clients {
			own = append(own, users[j])
		}
		wg.Go(func() {
			gens := make([]*hotpGen, len(own))
			for k, i := range own {
				gens[k] = newHOTP(scaleKey(scaleSerial(i)), otpDigits)
			}
			t := &tallies[w]
			for k := 0; ctx.Err() == nil && time.Now().Before(end); k++ {
				i := k % len(own)
				o, msg, lat := r.validateUser(ctx, own[i], gens[i])
				if o == outCancelled {
					return
				}
				t.record(o, lat, msg)
				if o == outTransport {
					sleep(ctx, transportBackoff)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := &tally{}
	for i := range tallies {
		total.merge(&tallies[i])
	}
	slices.Sort(total.lat)
	f := &validateFig{Clients: clients, Users: len(users), Seconds: round3(elapsed.Seconds()), Requests: total.requests, OK: total.ok}
	if elapsed > 0 {
		f.RequestsPerSec = round3(float64(total.ok) / elapsed.Seconds())
	}
	if len(total.lat) > 0 {
		f.P50MS, f.P99MS = ms(percentile(total.lat, 50)), ms(percentile(total.lat, 99))
	}
	if bad := total.requests - total.ok; bad > 0 {
		msg := ""
		for _, s := range total.samples {
			if s != "" {
				msg = s
				break
			}
		}
		f.Errors = bad
		r.fail("validate at %d clients: %d of %d requests failed (%s)", clients, bad, total.requests, msg)
	}
	r.res.Validate = append(r.res.Validate, f)
	r.logf("validate: %d clients: %.0f req/s, p50 %.1f ms, p99 %.1f ms", clients, f.RequestsPerSec, f.P50MS, f.P99MS)
}

// ---- admin queries ----

// listAnswer is the part of a GET /token/ answer the checks read.
type listAnswer struct {
	Count   *int64 `json:"count"`
	Current int    `json:"current"`
	Tokens  []struct {
		Serial   string `json:"serial"`
		Username string `json:"username"`
	} `json:"tokens"`
}

// query is one admin query and the check of its answer.
type query struct {
	name  string
	path  string
	check func(env *envelope) error
}

// tokenQuery checks a token list answer: count, page length and, when
// first is set, the first serial.
func tokenQuery(name, path string, count int64, page, pagesize int, first string) query {
	wantLen := int(max(0, min(int64(pagesize), count-int64((page-1)*pagesize))))
	return query{name: name, path: path, check: func(env *envelope) error {
		var a listAnswer
		if err := json.Unmarshal(env.Result.Value, &a); err != nil {
			return fmt.Errorf("not a token list: %s", snippet(env.Result.Value))
		}
		switch {
		case a.Count == nil:
			return fmt.Errorf("no count: %s", snippet(env.Result.Value))
		case *a.Count != count:
			return fmt.Errorf("count %d, want %d", *a.Count, count)
		case len(a.Tokens) != wantLen:
			return fmt.Errorf("%d tokens on page %d, want %d", len(a.Tokens), page, wantLen)
		case a.Current != 0 && a.Current != page:
			return fmt.Errorf("current page %d, want %d", a.Current, page)
		case first != "" && a.Tokens[0].Serial != first:
			return fmt.Errorf("first serial %s, want %s", a.Tokens[0].Serial, first)
		}
		return nil
	}}
}

// serialSubstring is the part of the serials the wildcard query looks for.
const serialSubstring = "0012"

// userPrefix is the login prefix of the user search: u0000120..u0000129.
const userPrefix = "u000012"

// tokenQueries are the list queries of the benchmark, for N tokens
// SC0000001..SCnnnnnnn owned by u0000001..unnnnnnn.
func tokenQueries(n int) []query {
	const ps = 15
	mid := (n + 1) / 2
	var wild int64
	firstWild := ""
	for i := 1; i <= n; i++ {
		if s := scaleSerial(i); strings.Contains(s, serialSubstring) {
			if wild == 0 {
				firstWild = s
			}
			wild++
		}
	}
	last := (n + ps - 1) / ps
	r := url.QueryEscape(scaleRealm)
	return []query{
		tokenQuery("page 1", "/token/?page=1&pagesize=15", int64(n), 1, ps, scaleSerial(1)),
		tokenQuery("serial=*"+serialSubstring+"*", "/token/?serial=*"+serialSubstring+"*&pagesize=15", wild, 1, ps, firstWild),
		tokenQuery("serial= exact", "/token/?serial="+scaleSerial(mid)+"&pagesize=15", 1, 1, ps, scaleSerial(mid)),
		tokenQuery("realm=", "/token/?realm="+r+"&pagesize=15", int64(n), 1, ps, scaleSerial(1)),
		tokenQuery("tokenrealm=", "/token/?tokenrealm="+r+"&pagesize=15", int64(n), 1, ps, scaleSerial(1)),
		tokenQuery("user=", "/token/?user="+scaleLogin(mid)+"&realm="+r+"&pagesize=15", 1, 1, ps, scaleSerial(mid)),
		tokenQuery("last page", "/token/?page="+strconv.Itoa(last)+"&pagesize=15", int64(n), last, ps, scaleSerial((last-1)*ps+1)),
	}
}

// userQuery is the user search: every login with userPrefix among 1..N.
func userQuery(n int) query {
	var want []string
	for i := 1; i <= n; i++ {
		if l := scaleLogin(i); strings.HasPrefix(l, userPrefix) {
			want = append(want, l)
		} else if len(want) > 0 {
			break
		}
	}
	return query{name: "username=" + userPrefix + "*", path: "/user/?realm=" + scaleRealm + "&username=" + userPrefix + "*", check: func(env *envelope) error {
		var users []struct {
			Username string `json:"username"`
		}
		if err := json.Unmarshal(env.Result.Value, &users); err != nil {
			return fmt.Errorf("not a user list: %s", snippet(env.Result.Value))
		}
		got := make([]string, len(users))
		for i, u := range users {
			got[i] = u.Username
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("%d users %v, want %d (%s*)", len(got), firstFew(got), len(want), userPrefix)
		}
		return nil
	}}
}

func firstFew(s []string) []string { return s[:min(len(s), 3)] }

// runQuery repeats q up to -reps times within -query-budget.
func (r *sizeRun) runQuery(ctx context.Context, q query) *queryFig {
	f := &queryFig{Name: q.name, Path: q.path}
	var lat []time.Duration
	var spent time.Duration
	for range r.cfg.reps {
		if ctx.Err() != nil || (len(lat) > 0 && spent >= r.cfg.budget) {
			break
		}
		t0 := time.Now()
		env, err := r.api.get(ctx, q.path)
		d := time.Since(t0)
		spent += d
		if err == nil {
			err = q.check(env)
		}
		if err != nil {
			f.Error = err.Error()
			r.fail("%s (%s) after %.0f ms: %v", q.name, q.path, float64(d)/1e6, err)
			break
		}
		lat = append(lat, d)
	}
	f.Calls = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		f.MedianMS, f.MaxMS = ms(percentile(lat, 50)), ms(lat[len(lat)-1])
	}
	f.OK = f.Error == "" && f.Calls > 0
	r.logf("%s: %d calls, median %.1f ms, max %.1f ms", q.name, f.Calls, f.MedianMS, f.MaxMS)
	return f
}

func (r *sizeRun) listQueries(ctx context.Context) {
	for _, q := range tokenQueries(r.n) {
		r.res.Queries = append(r.res.Queries, r.runQuery(ctx, q))
	}
}

func (r *sizeRun) userSearch(ctx context.Context) {
	r.res.UserSearch = r.runQuery(ctx, userQuery(r.n))
}

// ---- import ----

// importCSV imports -import tokens (IM0000001...) through POST /token/load
// in files of -import-file tokens, one after another, and times the
// whole.
func (r *sizeRun) importCSV(ctx context.Context) {
	f := &importFig{Tokens: r.cfg.importN, PerFile: r.cfg.importFile}
	r.res.Import = f
	began := time.Now()
	for from := 1; from <= r.cfg.importN && ctx.Err() == nil; from += r.cfg.importFile {
		to := min(from+r.cfg.importFile-1, r.cfg.importN)
		body, ctype, err := importBody(from, to)
		if err != nil {
			r.fail("import: %v", err)
			return
		}
		env, err := r.postRaw(ctx, "/token/load/"+importSerial(from)+".csv", ctype, body)
		if err != nil {
			f.Error = err.Error()
			r.fail("import of %s..%s: %v", importSerial(from), importSerial(to), err)
			return
		}
		var v struct {
			Imported int `json:"n_imported"`
		}
		if err := json.Unmarshal(env.Result.Value, &v); err != nil || v.Imported != to-from+1 {
			f.Error = fmt.Sprintf("imported %d of %d: %s", v.Imported, to-from+1, snippet(env.raw))
			r.fail("import of %s..%s: %s", importSerial(from), importSerial(to), f.Error)
			return
		}
		f.Imported += v.Imported
		f.Files++
	}
	f.Seconds = round3(time.Since(began).Seconds())
	if f.Seconds > 0 {
		f.TokensPerSec = round3(float64(f.Imported) / f.Seconds)
	}
	f.OK = f.Imported == f.Tokens
	r.logf("import: %d tokens in %d files in %.1fs", f.Imported, f.Files, f.Seconds)
}

// importBody is an OATH CSV file of tokens from..to as a multipart form.
func importBody(from, to int) ([]byte, string, error) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.WriteField("type", "oathcsv"); err != nil {
		return nil, "", err
	}
	fw, err := w.CreateFormFile("file", importSerial(from)+".csv")
	if err != nil {
		return nil, "", err
	}
	for i := from; i <= to; i++ {
		s := importSerial(i)
		fmt.Fprintf(fw, "%s,%x,hotp,6\n", s, scaleKey(s))
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return b.Bytes(), w.FormDataContentType(), nil
}

// postRaw posts body with ctype and the admin JWT.
func (r *sizeRun) postRaw(ctx context.Context, path, ctype string, body []byte) (*envelope, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Authorization", r.api.jwt)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	return decodeEnvelope(resp.StatusCode, raw)
}

// ---- memory ----

// memSampler reads /proc/PID/status every interval and keeps, per phase
// of the run, the largest RssAnon, RssFile and VmRSS.
type memSampler struct {
	pid  int
	mu   sync.Mutex
	cur  string
	max  map[string]*memFig
	quit chan struct{}
	wg   sync.WaitGroup
}

func startMemSampler(pid int, every time.Duration) *memSampler {
	m := &memSampler{pid: pid, cur: "start", max: map[string]*memFig{}, quit: make(chan struct{})}
	m.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			m.take()
			select {
			case <-m.quit:
				return
			case <-t.C:
			}
		}
	})
	return m
}

// phase names the phase the following samples belong to.
func (m *memSampler) phase(name string) {
	m.mu.Lock()
	m.cur = name
	m.mu.Unlock()
	m.take()
}

func (m *memSampler) take() {
	s, err := sampleProc(m.pid, "")
	if err != nil {
		return // the process is gone
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.max[m.cur]
	if f == nil {
		f = &memFig{}
		m.max[m.cur] = f
	}
	f.AnonKB, f.FileKB, f.RSSKB = max(f.AnonKB, s.AnonKB), max(f.FileKB, s.FileKB), max(f.RSSKB, s.RSSKB)
	f.Samples++
}

func (m *memSampler) stop() {
	select {
	case <-m.quit:
	default:
		close(m.quit)
	}
	m.wg.Wait()
}

// result is the maxima per phase and over the whole run.
func (m *memSampler) result() *memoryFig {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &memoryFig{Phases: map[string]memFig{}}
	for k, f := range m.max {
		out.Phases[k] = *f
		out.Max.AnonKB = max(out.Max.AnonKB, f.AnonKB)
		out.Max.FileKB = max(out.Max.FileKB, f.FileKB)
		out.Max.RSSKB = max(out.Max.RSSKB, f.RSSKB)
		out.Max.Samples += f.Samples
	}
	return out
}

// ---- settling ----

// settleIdle is the share of one core below which the server counts as
// idle, over a window of settleWindow.
const (
	settleIdle   = 0.1
	settleWindow = time.Second
)

// settle waits until the server is idle (requests a client gave up on
// may still run: a slow list goes on after its timeout), at most
// -settle, so that the next phase measures itself. It records how long
// it waited.
func (r *sizeRun) settle(ctx context.Context, phase string) {
	began := time.Now()
	deadline := began.Add(r.cfg.settleMax)
	for ctx.Err() == nil {
		t1, err := cpuTicks(r.srv.pid)
		if err != nil {
			return
		}
		sleep(ctx, settleWindow)
		t2, err := cpuTicks(r.srv.pid)
		if err != nil {
			return
		}
		if float64(t2-t1)/clockTicks < settleIdle*settleWindow.Seconds() {
			break
		}
		if time.Now().After(deadline) {
			r.res.Notes = append(r.res.Notes, fmt.Sprintf("the server was still busy %s before %s", r.cfg.settleMax, phase))
			break
		}
	}
	if r.res.SettleSeconds == nil {
		r.res.SettleSeconds = map[string]float64{}
	}
	d := time.Since(began)
	r.res.SettleSeconds[phase] = round3(d.Seconds())
	if d > 2*settleWindow {
		r.logf("waited %.1fs for the server to settle before %s", d.Seconds(), phase)
	}
}
