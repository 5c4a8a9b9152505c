package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scaleReport is the file the scale benchmark writes.
type scaleReport struct {
	Started    time.Time     `json:"started"`
	Command    string        `json:"command"`
	Server     string        `json:"server"`
	ServerArgs []string      `json:"server_args,omitempty"`
	CPUs       int           `json:"cpus"`
	Method     string        `json:"method"`
	Sizes      []*sizeResult `json:"sizes"`
}

// sizeResult is every figure of one size.
type sizeResult struct {
	N                   int                `json:"n"`
	WallSeconds         float64            `json:"wall_seconds"`
	Load                *loadStats         `json:"load"`
	StartToReadySeconds float64            `json:"start_to_ready_seconds"`
	Lookups             *lookupFig         `json:"lookups"`
	Queries             []*queryFig        `json:"token_queries"`
	UserSearch          *queryFig          `json:"user_search"`
	Validate            []*validateFig     `json:"validate"`
	Import              *importFig         `json:"import"`
	Memory              *memoryFig         `json:"memory"`
	DataBytesEnd        int64              `json:"data_bytes_end"`
	SettleSeconds       map[string]float64 `json:"settle_seconds,omitempty"`
	Notes               []string           `json:"notes,omitempty"`
	Errors              []string           `json:"errors,omitempty"`
}

type lookupFig struct {
	Count    int     `json:"count"`
	FirstMS  float64 `json:"first_ms"`
	LastMS   float64 `json:"last_ms"`
	MedianMS float64 `json:"median_ms"`
}

type queryFig struct {
	Name     string  `json:"name"`
	Path     string  `json:"path"`
	Calls    int     `json:"calls"`
	MedianMS float64 `json:"median_ms"`
	MaxMS    float64 `json:"max_ms"`
	OK       bool    `json:"ok"`
	Error    string  `json:"error,omitempty"`
}

type validateFig struct {
	Clients        int     `json:"clients"`
	Users          int     `json:"users"`
	Seconds        float64 `json:"seconds"`
	Requests       int64   `json:"requests"`
	OK             int64   `json:"ok"`
	Errors         int64   `json:"errors"`
	RequestsPerSec float64 `json:"requests_per_sec"`
	P50MS          float64 `json:"p50_ms"`
	P99MS          float64 `json:"p99_ms"`
}

type importFig struct {
	Tokens       int     `json:"tokens"`
	PerFile      int     `json:"per_file"`
	Files        int     `json:"files"`
	Imported     int     `json:"imported"`
	Seconds      float64 `json:"seconds"`
	TokensPerSec float64 `json:"tokens_per_sec"`
	OK           bool    `json:"ok"`
	Error        string  `json:"error,omitempty"`
}

type memFig struct {
	AnonKB  int64 `json:"rss_anon_kb"`
	FileKB  int64 `json:"rss_file_kb"`
	RSSKB   int64 `json:"vm_rss_kb"`
	Samples int   `json:"samples"`
}

type memoryFig struct {
	Max    memFig            `json:"max"`
	Phases map[string]memFig `json:"phases"`
}

func newScaleReport(cfg *scaleConfig, bin string) *scaleReport {
	return &scaleReport{
		Started:    time.Now().UTC().Truncate(time.Second),
		Command:    "authbench scale " + strings.Join(cfg.args, " "),
		Server:     bin,
		ServerArgs: cfg.serverArgs,
		CPUs:       runtime.NumCPU(),
		Method: fmt.Sprintf("Order per size: load, start, ready, lookups, token queries, user search, validate at each client count, import, so the memory of a phase includes what the ones before left. "+
			"Per size N: N passwd users u0000001.. and N HOTP tokens SC0000001.. (token i owned by user i, realm %s, otppin=none) "+
			"loaded through the library, then the binary started on the data directory. Lookups: %d /validate/check by user right after ready, each a different user. "+
			"Token queries and the user search: up to %d calls each (stopped after %s), median and max; every answer checked (count, page length, first serial). "+
			"Validate: HOTP success, %s per client count, over a working set of min(N, %d) users spread evenly over the N. "+
			"Import: %d tokens in OATH CSV files of %d through POST /token/load, one after another. "+
			"Memory: RssAnon, RssFile and VmRSS of the server from /proc every %s, the largest per phase.",
			scaleRealm, cfg.lookups, cfg.reps, cfg.budget, cfg.validateFor, cfg.workingSet, cfg.importN, cfg.importFile, cfg.sample),
	}
}

// failed reports whether any size recorded an error.
func (rep *scaleReport) failed() bool {
	for _, s := range rep.Sizes {
		if len(s.Errors) > 0 {
			return true
		}
	}
	return false
}

// write writes the JSON and the markdown file (atomically each).
func (rep *scaleReport) write(cfg *scaleConfig) error {
	js, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	if err := writeAtomic(cfg.jsonOut, 0o644, func(w io.Writer) error { _, err := w.Write(append(js, '\n')); return err }); err != nil {
		return err
	}
	md := rep.markdown()
	return writeAtomic(cfg.out, 0o644, func(w io.Writer) error { _, err := w.Write([]byte(md)); return err })
}

// row is one line of the markdown table: a label and a cell per size.
type row struct {
	label string
	cell  func(s *sizeResult) string
}

func sizeLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func mibKB(kb int64) string { return f1(float64(kb)/1024) + " MiB" }

func mbBytes(b int64) string { return f1(float64(b)/1e6) + " MB" }

func (rep *scaleReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# authsrv scale benchmark\n\nStarted %s on %d CPUs. Command:\n\n    %s\n\nServer: `%s`", rep.Started.Format(time.RFC3339), rep.CPUs, rep.Command, rep.Server)
	if len(rep.ServerArgs) > 0 {
		fmt.Fprintf(&b, " %s", strings.Join(rep.ServerArgs, " "))
	}
	fmt.Fprintf(&b, "\n\n%s\n\n", rep.Method)

	rows := []row{
		{"run time (load + measures)", func(s *sizeResult) string { return f1(s.WallSeconds) + " s" }},
		{"load: total (passwd, import, assign)", func(s *sizeResult) string {
			if s.Load == nil {
				return "—"
			}
			return fmt.Sprintf("%s s (%s, %s, %s)", f1(s.Load.TotalSeconds), f1(s.Load.PasswdSeconds), f1(s.Load.ImportSeconds), f1(s.Load.AssignSeconds))
		}},
		{"passwd file", func(s *sizeResult) string {
			if s.Load == nil {
				return "—"
			}
			return mbBytes(s.Load.PasswdBytes)
		}},
		{"data file after load / at end", func(s *sizeResult) string {
			if s.Load == nil {
				return "—"
			}
			return mbBytes(s.Load.DataBytes) + " / " + mbBytes(s.DataBytesEnd)
		}},
		{"start to ready (readyz)", func(s *sizeResult) string { return f1(s.StartToReadySeconds*1000) + " ms" }},
		{"first user lookup / 1000th (median)", func(s *sizeResult) string {
			if s.Lookups == nil {
				return "—"
			}
			return fmt.Sprintf("%s / %s (%s) ms", f1(s.Lookups.FirstMS), f1(s.Lookups.LastMS), f1(s.Lookups.MedianMS))
		}},
	}
	var qnames []string
	for _, s := range rep.Sizes {
		for _, q := range s.Queries {
			if !slices.Contains(qnames, q.Name) {
				qnames = append(qnames, q.Name)
			}
		}
	}
	for _, name := range qnames {
		rows = append(rows, row{"GET /token/ " + name + ": median / max", func(s *sizeResult) string {
			for _, q := range s.Queries {
				if q.Name == name {
					return queryCell(q)
				}
			}
			return "—"
		}})
	}
	rows = append(rows, row{"GET /user/ username=" + userPrefix + "*: median / max", func(s *sizeResult) string { return queryCell(s.UserSearch) }})
	var clients []int
	for _, s := range rep.Sizes {
		for _, v := range s.Validate {
			if !slices.Contains(clients, v.Clients) {
				clients = append(clients, v.Clients)
			}
		}
	}
	for _, c := range clients {
		rows = append(rows, row{fmt.Sprintf("validate %d clients: req/s, p50 / p99", c), func(s *sizeResult) string {
			for _, v := range s.Validate {
				if v.Clients == c {
					cell := fmt.Sprintf("%.0f, %s / %s ms", v.RequestsPerSec, f1(v.P50MS), f1(v.P99MS))
					if v.Errors > 0 {
						cell += fmt.Sprintf(" (%d errors)", v.Errors)
					}
					return cell
				}
			}
			return "—"
		}})
	}
	rows = append(rows,
		row{"import via /token/load", func(s *sizeResult) string {
			if s.Import == nil {
				return "—"
			}
			if !s.Import.OK {
				return fmt.Sprintf("FAILED after %d of %d tokens", s.Import.Imported, s.Import.Tokens)
			}
			return fmt.Sprintf("%d tokens in %s s (%.0f/s)", s.Import.Imported, f1(s.Import.Seconds), s.Import.TokensPerSec)
		}},
	)
	for _, ph := range []struct{ key, label string }{{"idle", "idle after ready"}, {"validate", "under validate load"}, {"lists", "during the token queries"}, {"", "whole run"}} {
		rows = append(rows, row{"RSS anon / file, max " + ph.label, func(s *sizeResult) string {
			if s.Memory == nil {
				return "—"
			}
			f := s.Memory.Max
			if ph.key != "" {
				var ok bool
				if f, ok = s.Memory.Phases[ph.key]; !ok {
					return "—"
				}
			}
			return mibKB(f.AnonKB) + " / " + mibKB(f.FileKB)
		}})
	}
	rows = append(rows, row{"errors", func(s *sizeResult) string {
		if len(s.Errors) == 0 {
			return "none"
		}
		return strconv.Itoa(len(s.Errors)) + " (below)"
	}})

	b.WriteString("| figure |")
	for _, s := range rep.Sizes {
		fmt.Fprintf(&b, " N=%s |", sizeLabel(s.N))
	}
	b.WriteString("\n|---|")
	for range rep.Sizes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s |", r.label)
		for _, s := range rep.Sizes {
			fmt.Fprintf(&b, " %s |", strings.ReplaceAll(r.cell(s), "|", "\\|"))
		}
		b.WriteString("\n")
	}
	for _, s := range rep.Sizes {
		for _, e := range s.Errors {
			fmt.Fprintf(&b, "\n- N=%s: %s", sizeLabel(s.N), e)
		}
		for _, e := range s.Notes {
			fmt.Fprintf(&b, "\n- N=%s (note): %s", sizeLabel(s.N), e)
		}
	}
	b.WriteString("\n")
	rep.writeTargets(&b)
	return b.String()
}

// target is one line of issue 17's "Done when", judged on one size.
type target struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Issue 17's bounds.
const (
	targetListMedianMS = 10
	targetListMaxMS    = 50
	targetUserMS       = 20
	targetP99Ratio     = 1.5
	targetIdleMiB      = 100
	targetLoadMiB      = 300
	targetImportPerSec = 100000.0 / 60 // 100k tokens in under a minute
)

// targets judges s against issue 17's "Done when"; base is the run's
// first size, the reference of the validate p99.
func targets(s, base *sizeResult) []target {
	var out []target
	add := func(name string, ok bool, format string, a ...any) {
		out = append(out, target{Name: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}
	if len(s.Queries) > 0 {
		ok, worstMed, worstMax := true, 0.0, 0.0
		for _, q := range s.Queries {
			ok = ok && q.OK && q.MedianMS <= targetListMedianMS && q.MaxMS <= targetListMaxMS
			worstMed, worstMax = max(worstMed, q.MedianMS), max(worstMax, q.MaxMS)
		}
		add(fmt.Sprintf("every token list query ≤ %d ms median, ≤ %d ms max", targetListMedianMS, targetListMaxMS), ok,
			"worst median %s ms, worst max %s ms", f1(worstMed), f1(worstMax))
	}
	if q := s.UserSearch; q != nil {
		add(fmt.Sprintf("GET /user/ with a search ≤ %d ms (median)", targetUserMS), q.OK && q.MedianMS <= targetUserMS, "%s ms", f1(q.MedianMS))
	}
	if v, b := validateAt(s, 32), validateAt(base, 32); v != nil && b != nil && s != base {
		add(fmt.Sprintf("validate p99 at 32 clients ≤ %.1fx N=%s's", targetP99Ratio, sizeLabel(base.N)),
			v.Errors == 0 && v.P99MS <= targetP99Ratio*b.P99MS, "%s ms against %s ms", f1(v.P99MS), f1(b.P99MS))
	}
	if m := s.Memory; m != nil && s.Load != nil {
		passwdMiB := float64(s.Load.PasswdBytes) / (1 << 20)
		if idle, ok := m.Phases["idle"]; ok {
			mib := float64(idle.RSSKB) / 1024
			add(fmt.Sprintf("RSS idle ≤ %d MiB (+ the passwd file)", targetIdleMiB), mib <= targetIdleMiB+passwdMiB,
				"%s MiB (passwd %s MiB)", f1(mib), f1(passwdMiB))
		}
		var busy int64
		for ph, f := range m.Phases {
			if ph != "idle" && ph != "start" {
				busy = max(busy, f.RSSKB)
			}
		}
		mib := float64(busy) / 1024
		add(fmt.Sprintf("RSS under load and admin queries ≤ %d MiB (+ the passwd file)", targetLoadMiB), mib <= targetLoadMiB+passwdMiB,
			"%s MiB (passwd %s MiB)", f1(mib), f1(passwdMiB))
	}
	if im := s.Import; im != nil {
		add("import via /token/load at 100k tokens in under a minute", im.OK && im.TokensPerSec >= targetImportPerSec,
			"%.0f tokens/s", im.TokensPerSec)
	}
	if l := s.Lookups; l != nil {
		add("first user lookup as fast as later ones (≤ 2x their median + 5 ms)", l.FirstMS <= 2*l.MedianMS+5,
			"first %s ms, median %s ms", f1(l.FirstMS), f1(l.MedianMS))
	}
	return out
}

func validateAt(s *sizeResult, clients int) *validateFig {
	for _, v := range s.Validate {
		if v.Clients == clients {
			return v
		}
	}
	return nil
}

// writeTargets adds the table of issue 17's targets, one column per size.
func (rep *scaleReport) writeTargets(b *strings.Builder) {
	if len(rep.Sizes) == 0 {
		return
	}
	var names []string
	cells := map[string]map[int]string{}
	for i, s := range rep.Sizes {
		for _, t := range targets(s, rep.Sizes[0]) {
			if cells[t.Name] == nil {
				names = append(names, t.Name)
				cells[t.Name] = map[int]string{}
			}
			verdict := "yes"
			if !t.OK {
				verdict = "**no**"
			}
			cells[t.Name][i] = verdict + ": " + t.Detail
		}
	}
	b.WriteString("\n## Targets of issue 17 (\"Done when\")\n\n| target |")
	for _, s := range rep.Sizes {
		fmt.Fprintf(b, " N=%s |", sizeLabel(s.N))
	}
	b.WriteString("\n|---|")
	for range rep.Sizes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, name := range names {
		fmt.Fprintf(b, "| %s |", name)
		for i := range rep.Sizes {
			c, ok := cells[name][i]
			if !ok {
				c = "—"
			}
			fmt.Fprintf(b, " %s |", c)
		}
		b.WriteString("\n")
	}
}

func queryCell(q *queryFig) string {
	if q == nil {
		return "—"
	}
	if !q.OK {
		if q.Calls > 0 {
			return fmt.Sprintf("FAILED after %d good calls (%s / %s ms): %s", q.Calls, f1(q.MedianMS), f1(q.MaxMS), q.Error)
		}
		return "FAILED: " + q.Error
	}
	return fmt.Sprintf("%s / %s ms (%d calls)", f1(q.MedianMS), f1(q.MaxMS), q.Calls)
}
