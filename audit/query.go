package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// columns are privacyIDEA's audit columns in its order.
var columns = []string{
	"number", "date", "startdate", "duration", "action", "success", "authentication", "serial",
	"token_type", "user", "realm", "resolver", "administrator", "action_detail", "info",
	"privacyidea_server", "client", "user_agent", "user_agent_version", "policies", "thread_id",
	"sig_check", "missing_line",
}

var isColumn = func() map[string]bool {
	m := make(map[string]bool, len(columns))
	for _, c := range columns {
		m[c] = true
	}
	return m
}()

// Columns lists the audit columns in privacyIDEA's order: number, date,
// startdate, duration, action, success, authentication, serial,
// token_type, user, realm, resolver, administrator, action_detail, info,
// privacyidea_server, client, user_agent, user_agent_version, policies,
// thread_id, sig_check, missing_line.
func Columns() []string { return slices.Clone(columns) }

// Paging limits of Search.
const (
	DefaultPageSize = 15
	MaxPageSize     = 1000
)

// DateLayout is how date and startdate are shown (privacyIDEA's, in UTC).
const DateLayout = "2006-01-02T15:04:05.000000"

// Query selects audit entries for Search and Each.
type Query struct {
	// Filters maps a column to a value it must have. A * is a wildcard
	// anywhere in the value, and matching ignores case. An empty value or
	// one made only of * does not filter (as privacyIDEA). Values are
	// matched as Row shows them (success is 1 or 0). An unknown column is
	// a Parameter error.
	Filters map[string]string
	// Since keeps entries dated at or after it; zero means no limit (the
	// API's timelimit).
	Since time.Time
	// Page is 1-based; below 1 means 1.
	Page int
	// PageSize below 1 means DefaultPageSize; it is capped at MaxPageSize.
	PageSize int
	// Ascending sorts oldest first; the default is newest first.
	Ascending bool
	// Hide lists columns left out of the rows (hide_audit_columns): the
	// API does not show them and WriteCSV leaves their cells empty.
	Hide []string
}

// Row is one entry as the API shows it, by column: date and startdate in
// DateLayout (UTC, empty when unset), duration as Python's timedelta
// prints it ("0:00:00.123456"), success 1 or 0 and number as int,
// sig_check and missing_line "OK" or "FAIL", every other column a string.
//
// sig_check is OK when the stored hash equals the recomputation from the
// entry and its stored prev and the signature verifies. missing_line is
// FAIL when the entry before it is missing and lies after the base
// checkpoint (retention removes entries only before the base).
type Row map[string]any

// Result is one page of a Search. Count is the number of all matching
// entries; Next and Prev are 0 when there is no such page.
type Result struct {
	Rows    []Row
	Count   int
	Current int
	Next    int
	Prev    int
}

// filter is one compiled column filter.
type filter struct {
	col string
	// parts are the lower-case pieces between the wildcards; a single
	// part means an exact match.
	parts []string
}

func (f filter) match(s string) bool {
	s = strings.ToLower(s)
	if len(f.parts) == 1 {
		return s == f.parts[0]
	}
	first, last := f.parts[0], f.parts[len(f.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range f.parts[1 : len(f.parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// plan is a compiled Query.
type plan struct {
	filters []filter
	since   time.Time
	hide    map[string]bool
	desc    bool
	// columns is set when a filter needs the entry's columns.
	columns bool
	// needles are lower-case texts that a matching entry's stored bytes
	// hold verbatim (see match); they rule most entries out without
	// decoding them.
	needles [][]byte
	scratch []byte
}

// textColumns are the columns Row shows exactly as stored.
var textColumns = map[string]bool{
	"action": true, "authentication": true, "serial": true, "token_type": true, "user": true,
	"realm": true, "resolver": true, "administrator": true, "action_detail": true, "info": true,
	"privacyidea_server": true, "client": true, "user_agent": true, "user_agent_version": true,
	"policies": true, "thread_id": true,
}

func compile(q Query) (*plan, error) {
	p := &plan{since: q.Since, desc: !q.Ascending}
	cols := make([]string, 0, len(q.Filters))
	for c := range q.Filters {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for _, c := range cols {
		if !isColumn[c] {
			return nil, apierr.New(apierr.Parameter, "Unknown audit column: "+c)
		}
		v := q.Filters[c]
		if strings.Trim(strings.TrimSpace(v), "*") == "" {
			continue
		}
		f := filter{col: c, parts: strings.Split(strings.ToLower(v), "*")}
		p.filters = append(p.filters, f)
		if c != "number" && c != "missing_line" {
			p.columns = true
		}
		if textColumns[c] {
			for _, part := range f.parts {
				// encoding/json writes these escaped, and U+FFFD may stand
				// for an invalid byte.
				if part != "" && !strings.ContainsAny(part, "\"<>&\u2028\u2029\ufffd") && !hasControl(part) {
					p.needles = append(p.needles, []byte(part))
				}
			}
		}
	}
	for _, c := range q.Hide {
		if p.hide == nil {
			p.hide = map[string]bool{}
		}
		p.hide[c] = true
	}
	return p, nil
}

// reader reads entries inside one transaction.
type reader struct {
	pub   ed25519.PublicKey
	b     store.Bucket
	seals store.Bucket
	// baseNum is the first number after which a missing entry counts: the
	// base checkpoint's, when it verifies, else 1.
	baseNum uint64
	// groups caches the seals checked so far, by the number they are
	// stored under.
	groups map[uint64]sealGroup
}

// sealGroup is a checked seal: the first entry it covers, and whether it
// verifies over the stored hashes of its entries.
type sealGroup struct {
	first uint64
	ok    bool
}

func (l *Log) reader(tx store.Tx) *reader {
	r := &reader{pub: l.pub, b: tx.Bucket(entryBucket), seals: tx.Bucket(sealBucket), baseNum: 1}
	if raw := tx.Bucket(metaBucket).Get(baseKey); raw != nil {
		var c checkpoint
		if json.Unmarshal(raw, &c) == nil && c.Kind == "base" && ed25519.Verify(l.pub, c.message(), c.Sig) {
			r.baseNum = max(1, c.Number)
		}
	}
	return r
}

// candidate is one stored entry under consideration. It is decoded only
// as far as needed: matching needs the columns, sig_check the hashes too.
type candidate struct {
	num   uint64
	raw   []byte
	rec   record
	level int  // 0: not decoded, 1: schema and columns, 2: all of it
	bad   bool // does not decode: only the number is known
}

func (c *candidate) decodeColumns() {
	if c.level >= 1 {
		return
	}
	c.level = 1
	var rec record
	if decodeRecord(c.raw, &rec, decodeColumns) != nil {
		c.bad = true
		return
	}
	c.rec.Schema, c.rec.Entry = rec.Schema, rec.Entry
}

// decodeDate decodes the entry's date alone, when nothing more is decoded
// yet.
func (c *candidate) decodeDate() {
	if c.level >= 1 {
		return
	}
	var rec record
	if decodeRecord(c.raw, &rec, decodeDate) != nil {
		c.bad = true
		return
	}
	c.rec.Entry.Date = rec.Entry.Date
}

func (c *candidate) decode() {
	if c.level >= 2 {
		return
	}
	c.level = 2
	c.rec = record{}
	if c.bad || decodeRecord(c.raw, &c.rec, decodeAll) != nil {
		c.bad, c.rec = true, record{}
	}
}

// sealed reports whether a valid seal covers entry n: the seal stored
// under the last entry of n's commit verifies, and the stored hashes of
// that commit's entries give its digest.
func (r *reader) sealed(n uint64) bool {
	k, raw := r.seals.Cursor().Seek(store.Uint64Key(n))
	if k == nil {
		return false
	}
	at := store.KeyUint64(k)
	g, seen := r.groups[at]
	if !seen {
		c, ok := checkSeal(r.pub, r.b, at, raw)
		g = sealGroup{first: c.First, ok: ok}
		if r.groups == nil {
			r.groups = map[uint64]sealGroup{}
		}
		r.groups[at] = g
	}
	return g.ok && g.first <= n
}

func okFail(ok bool) string {
	if ok {
		return "OK"
	}
	return "FAIL"
}

// cell is the value of column col as Row shows it.
func (r *reader) cell(c *candidate, col string) any {
	switch col {
	case "number":
		return int(c.num)
	case "missing_line":
		return okFail(c.num-1 < r.baseNum || r.b.Get(store.Uint64Key(c.num-1)) != nil)
	}
	if col == "sig_check" {
		c.decode()
		return okFail(!c.bad && entryOK(r.pub, c.num, &c.rec) && (len(c.rec.Sig) > 0 || r.sealed(c.num)))
	}
	c.decodeColumns()
	e := &c.rec.Entry
	switch col {
	case "date":
		return formatDate(e.Date)
	case "startdate":
		return formatDate(e.StartDate)
	case "duration":
		if c.bad {
			return ""
		}
		return formatDuration(e.Duration)
	case "success":
		if e.Success {
			return 1
		}
		return 0
	case "action":
		return e.Action
	case "authentication":
		return e.Authentication
	case "serial":
		return e.Serial
	case "token_type":
		return e.TokenType
	case "user":
		return e.User
	case "realm":
		return e.Realm
	case "resolver":
		return e.Resolver
	case "administrator":
		return e.Administrator
	case "action_detail":
		return e.ActionDetail
	case "info":
		return e.Info
	case "privacyidea_server":
		return e.Node
	case "client":
		return e.Client
	case "user_agent":
		return e.UserAgent
	case "user_agent_version":
		return e.UserAgentVersion
	case "policies":
		return e.Policies
	case "thread_id":
		return e.ThreadID
	}
	return ""
}

func (r *reader) row(c *candidate, hide map[string]bool) Row {
	c.decode()
	row := make(Row, len(columns))
	for _, col := range columns {
		if !hide[col] {
			row[col] = r.cell(c, col)
		}
	}
	return row
}

// lower returns b lower-cased, in the plan's scratch buffer when b is
// ASCII.
func (p *plan) lower(b []byte) []byte {
	low := p.scratch[:0]
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return bytes.ToLower(b)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low = append(low, c)
	}
	p.scratch = low
	return low
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func (p *plan) match(r *reader, c *candidate) bool {
	// A stored JSON value without a backslash escape is written verbatim,
	// so the lower-cased JSON of a matching entry holds every needle.
	// Lower-casing maps rune by rune and the escaped characters map to
	// themselves, so this never rules out a match; a record with any
	// escape is decoded. A compact record holds every string column
	// verbatim after its length, whose last byte is ASCII: the columns'
	// part alone (not the hashes, which would send the record through
	// Unicode lower-casing) holds every needle the same way.
	if len(p.needles) > 0 {
		if hay, ok := haystack(c.raw); ok {
			low := p.lower(hay)
			for _, n := range p.needles {
				if !bytes.Contains(low, n) {
					return false
				}
			}
		}
	}
	if !p.since.IsZero() {
		if p.columns {
			c.decodeColumns()
		} else {
			c.decodeDate()
		}
		if c.bad || c.rec.Entry.Date.Before(p.since) {
			return false
		}
	}
	for _, f := range p.filters {
		var s string
		switch v := r.cell(c, f.col).(type) {
		case string:
			s = v
		case int:
			s = strconv.Itoa(v)
		}
		if !f.match(s) {
			return false
		}
	}
	return true
}

// haystack is the part of a stored entry the needles are looked for in:
// a JSON record without escapes, or the columns of a compact one.
func haystack(raw []byte) ([]byte, bool) {
	if len(raw) > 0 && raw[0] == '{' {
		return raw, bytes.IndexByte(raw, '\\') < 0
	}
	return columnText(raw)
}

// first and next walk a cursor in the plan's order.
func (p *plan) first(c store.Cursor) ([]byte, []byte) {
	if p.desc {
		return c.Last()
	}
	return c.First()
}

func (p *plan) next(c store.Cursor) ([]byte, []byte) {
	if p.desc {
		return c.Prev()
	}
	return c.Next()
}

// after positions c on the first entry after number n in the plan's
// order.
func (p *plan) after(c store.Cursor, n uint64) ([]byte, []byte) {
	if !p.desc {
		if n == math.MaxUint64 {
			return nil, nil
		}
		return c.Seek(store.Uint64Key(n + 1))
	}
	if k, _ := c.Seek(store.Uint64Key(n)); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// countAll is the number of entries when p matches every entry (no
// filter, no Since): entries are numbered consecutively and retention
// removes only the oldest, so the first and the last number give the
// count without walking the log. An entry removed from the middle
// behind the server's back (which "audit verify" and the missing_line
// column report) makes this count one too high per missing entry.
func (p *plan) countAll(c store.Cursor) (uint64, bool) {
	if len(p.filters) > 0 || !p.since.IsZero() {
		return 0, false
	}
	first, _ := c.First()
	if first == nil {
		return 0, true
	}
	last, _ := c.Last()
	if len(first) != 8 || len(last) != 8 {
		return 0, false
	}
	return store.KeyUint64(last) - store.KeyUint64(first) + 1, true
}

// window is the rows [from, from+size) in p's order of a log that p
// matches entirely (see countAll): it seeks to the from-th number instead
// of walking to it.
func (p *plan) window(r *reader, c store.Cursor, from uint64, size int) []Row {
	first, _ := c.First()
	last, _ := c.Last()
	if first == nil || from > store.KeyUint64(last)-store.KeyUint64(first) {
		return nil
	}
	var k, v []byte
	if p.desc {
		k, v = c.Seek(store.Uint64Key(store.KeyUint64(last) - from))
		if k == nil || store.KeyUint64(k) > store.KeyUint64(last)-from {
			k, v = c.Prev()
		}
	} else {
		k, v = c.Seek(store.Uint64Key(store.KeyUint64(first) + from))
	}
	var rows []Row
	for ; k != nil && len(rows) < size; k, v = p.next(c) {
		if len(k) != 8 {
			continue
		}
		cand := candidate{num: store.KeyUint64(k), raw: v}
		rows = append(rows, r.row(&cand, p.hide))
	}
	return rows
}

// checkEvery is how many entries a walk reads between checks of ctx.
const checkEvery = 4096

// Search returns one page of the entries that match q, and how many match
// in all. With a filter or Since it walks the whole log in one read
// transaction, decoding entries only when a filter or Since needs their
// columns (the count needs every entry; dates are not trusted to be in
// number order). Without either it reads only the page (see countAll).
func (l *Log) Search(ctx context.Context, q Query) (Result, error) {
	p, err := compile(q)
	if err != nil {
		return Result{}, err
	}
	page := max(q.Page, 1)
	size := q.PageSize
	if size < 1 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	// The page's window [from, from+size) of the matches; an unreachable
	// page saturates instead of overflowing.
	from := uint64(math.MaxUint64)
	if uint64(page-1) <= math.MaxUint64/uint64(size) {
		from = uint64(page-1) * uint64(size)
	}

	var res Result
	err = l.cfg.Store.View(ctx, func(tx store.Tx) error {
		res = Result{Current: page}
		r := l.reader(tx)
		c := r.b.Cursor()
		if n, ok := p.countAll(c); ok {
			res.Rows = p.window(r, c, from, size)
			res.Count = int(min(n, math.MaxInt))
			if n > from && n-from > uint64(size) {
				res.Next = page + 1
			}
			return nil
		}
		var count, scanned uint64
		var cand candidate
		for k, v := p.first(c); k != nil; k, v = p.next(c) {
			if scanned++; scanned%checkEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if len(k) != 8 {
				continue
			}
			cand = candidate{num: store.KeyUint64(k), raw: v}
			if !p.match(r, &cand) {
				continue
			}
			if count >= from && count-from < uint64(size) {
				res.Rows = append(res.Rows, r.row(&cand, p.hide))
			}
			count++
		}
		res.Count = int(min(count, math.MaxInt))
		if count > from && count-from > uint64(size) {
			res.Next = page + 1
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("audit search: %w", err)
	}
	if page > 1 {
		res.Prev = page - 1
	}
	return res, nil
}

// eachBatch is how many rows Each reads per transaction: the callback
// (a client download) runs outside any transaction.
const eachBatch = 500

// Each streams every row matching q (no paging) in the query's order to
// fn, for the CSV download. It reads in short transactions of eachBatch
// rows, so a slow client does not hold one open; entries written while it
// runs may or may not appear. fn's error stops the walk and is returned.
func (l *Log) Each(ctx context.Context, q Query, fn func(Row) error) error {
	p, err := compile(q)
	if err != nil {
		return err
	}
	var (
		last    uint64 // number of the last row handed out
		started bool
	)
	for {
		var (
			rows []Row
			done bool
		)
		err := l.cfg.Store.View(ctx, func(tx store.Tx) error {
			rows, done = rows[:0], false
			r := l.reader(tx)
			c := r.b.Cursor()
			k, v := p.first(c)
			if started {
				k, v = p.after(c, last)
			}
			var scanned int
			var cand candidate
			for ; k != nil; k, v = p.next(c) {
				if scanned++; scanned%checkEvery == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				if len(k) != 8 {
					continue
				}
				cand = candidate{num: store.KeyUint64(k), raw: v}
				if !p.match(r, &cand) {
					continue
				}
				rows = append(rows, r.row(&cand, p.hide))
				if len(rows) == eachBatch {
					last = cand.num
					return nil
				}
			}
			done = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		for _, row := range rows {
			if err := fn(row); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		started = true
	}
}

func formatDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(DateLayout)
}

// formatDuration prints seconds as Python prints a timedelta:
// "0:00:00.123456", "0:00:02" without microseconds, "1 day, 2:00:00".
func formatDuration(sec float64) string {
	us := math.Round(sec * 1e6)
	if math.IsNaN(us) || us >= math.MaxInt64 || us <= math.MinInt64 {
		return ""
	}
	const day = 86400 * 1e6
	total := int64(us)
	days := total / day
	rem := total % day
	if rem < 0 { // Python floors: -1s is "-1 day, 23:59:59"
		days, rem = days-1, rem+day
	}
	h, rem := rem/3600e6, rem%3600e6
	m, rem := rem/60e6, rem%60e6
	s, micro := rem/1e6, rem%1e6
	out := fmt.Sprintf("%d:%02d:%02d", h, m, s)
	if micro != 0 {
		out += fmt.Sprintf(".%06d", micro)
	}
	if days != 0 {
		plural := "s"
		if days == 1 || days == -1 {
			plural = ""
		}
		out = fmt.Sprintf("%d day%s, %s", days, plural, out)
	}
	return out
}

// timelimitUnits are the units of a timelimit.
var timelimitUnits = map[byte]time.Duration{
	's': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour,
}

// ParseTimelimit reads a timelimit such as "1d", "2h", "30m", "10s", "1w"
// or a combination like "1d2h" (a number before each unit) into a
// duration. Errors are Parameter errors.
func ParseTimelimit(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	bad := func() (time.Duration, error) {
		shown := in // echoed in at most 20 bytes
		if len(shown) > 20 {
			shown = shown[:20] + "..."
		}
		return 0, apierr.New(apierr.Parameter,
			fmt.Sprintf("Invalid timelimit %q: use numbers with units s, m, h, d or w, like 1d or 1d2h", shown))
	}
	if in == "" {
		return bad()
	}
	var total time.Duration
	for i := 0; i < len(in); {
		j := i
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
		if j == i || j == len(in) {
			return bad()
		}
		unit, ok := timelimitUnits[in[j]]
		if !ok {
			return bad()
		}
		n, err := strconv.ParseInt(in[i:j], 10, 64)
		if err != nil || n > int64(math.MaxInt64/unit) {
			return bad()
		}
		d := time.Duration(n) * unit
		if total > math.MaxInt64-d {
			return bad()
		}
		total += d
		i = j + 1
	}
	return total, nil
}

// WriteCSV writes rows as CSV: a header line of Columns(), then one line
// per row (a column missing from a row, such as a hidden one, is empty).
// A text value starting with = + - @, a tab or a carriage return gets a
// leading single quote, so that spreadsheets do not run it as a formula.
// rows calls its argument once per row, as Each does.
func WriteCSV(w io.Writer, rows func(func(Row) error) error) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(columns); err != nil {
		return err
	}
	line := make([]string, len(columns))
	err := rows(func(r Row) error {
		for i, col := range columns {
			line[i] = csvCell(r[col])
		}
		return cw.Write(line)
	})
	cw.Flush()
	if err != nil {
		return err
	}
	return cw.Error()
}

func csvCell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case int:
		return strconv.Itoa(v)
	case string:
		if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
			return "'" + v
		}
		return v
	default:
		return csvCell(fmt.Sprint(v))
	}
}
