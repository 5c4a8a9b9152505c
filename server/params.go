package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/authsrv/authsrv/apierr"
)

// Body limits of reliability.md A13; handlers with other needs (token
// import) pass their own.
const (
	// bodyLimitAuth caps the bodies of /validate/* and /auth.
	bodyLimitAuth int64 = 64 << 10
	// bodyLimitAdmin caps the bodies of every other endpoint.
	bodyLimitAdmin int64 = 1 << 20
)

const (
	// maxParams is the most parameters one request may carry: query pairs,
	// form fields, file parts and top-level JSON keys together, repeats
	// included. It bounds the work an attacker can ask for per request.
	maxParams = 1000
	// maxJSONDepth is the deepest nesting of objects and arrays a JSON body
	// may have; the body object itself is level 1.
	maxJSONDepth = 64
)

// noUnquoteAgents are the User-Agent product names (lower case) whose
// values privacyIDEA does not percent-decode a second time (NO_UNQUOTE_USER_AGENTS).
var noUnquoteAgents = [...]string{"privacyidea-cp", "privacyidea-ldap-proxy", "simplesamlphp"}

// params holds the merged request parameters of spec/validate-token-auth.md
// section 0. Values are strings (query, form and path) or JSON values as
// encoding/json decodes them with UseNumber (string, json.Number, bool, nil,
// []any, map[string]any). It holds passwords and OTPs: String redacts.
type params struct {
	values map[string]any
	files  map[string]upload
}

// upload is a multipart file part.
type upload struct {
	data     []byte
	filename string
}

// decodeParams reads the query string and the body of r behind
// http.MaxBytesReader(limit) and merges them as privacyIDEA does: query
// values first (the first of a repeated key wins), then form fields for
// keys not set yet, then the keys of a JSON body override, then the path
// parameters override everything.
//
// Query and form values (not JSON values, not path parameters) are
// percent-decoded a second time with Python's unquote semantics, unless the
// User-Agent is one of noUnquoteAgents; real clients rely on it
// (spec/real-clients.md point 2). Bodies of other content types are
// ignored. Every error is an *apierr.Error of kind apierr.Parameter.
//
// The body is wrapped without a ResponseWriter, so exceeding the limit does
// not by itself close the connection; a caller that wants that wraps
// r.Body with http.MaxBytesReader(w, ...) first.
func decodeParams(r *http.Request, path httprouter.Params, limit int64) (*params, error) {
	if err := checkContentEncoding(r.Header); err != nil {
		return nil, err
	}
	d := paramDecoder{
		p:       &params{values: make(map[string]any)},
		unquote: wantsUnquote(r.Header.Get("User-Agent")),
	}
	if r.URL != nil {
		if err := d.urlencoded(r.URL.RawQuery); err != nil {
			return nil, err
		}
	}

	kind, ctParams := classifyBody(r.Header.Get("Content-Type"))
	if kind != bodyIgnored && r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > limit {
			return nil, errBodyTooLarge()
		}
		body := http.MaxBytesReader(nil, r.Body, limit)
		var err error
		switch kind {
		case bodyForm:
			var b []byte
			if b, err = readAll(body, r.ContentLength); err == nil {
				err = d.urlencoded(string(b))
			}
		case bodyMultipart:
			err = d.multipart(body, ctParams["boundary"])
		case bodyJSON:
			var b []byte
			if b, err = readAll(body, r.ContentLength); err == nil {
				err = d.json(b)
			}
		}
		if err != nil {
			return nil, err
		}
	}

	for _, pp := range path {
		d.p.values[pp.Key] = pp.Value
	}
	return d.p, nil
}

// paramDecoder fills one params value.
type paramDecoder struct {
	p       *params
	unquote bool // percent-decode form and query values a second time
	n       int  // parameters seen so far
}

// count counts one more parameter and refuses the request beyond maxParams.
func (d *paramDecoder) count(n int) error {
	d.n += n
	if d.n > maxParams {
		return apierr.Newf(apierr.Parameter, "too many parameters (more than %d)", maxParams)
	}
	return nil
}

// addForm stores a query or form value unless the key is already set.
// value has had its first decoding and is valid UTF-8.
func (d *paramDecoder) addForm(key string, value func() string) {
	if _, ok := d.p.values[key]; ok {
		return
	}
	v := value()
	if d.unquote {
		v = unquote(v)
	}
	d.p.values[key] = v
}

// urlencoded parses s as Python's parse_qsl(keep_blank_values=True) does:
// pairs split at '&' only, empty pairs skipped, a pair without '=' is a key
// with an empty value, '+' is a space, invalid % sequences stay literal and
// invalid UTF-8 becomes U+FFFD.
func (d *paramDecoder) urlencoded(s string) error {
	for s != "" {
		var pair string
		pair, s, _ = strings.Cut(s, "&")
		if pair == "" {
			continue
		}
		if err := d.count(1); err != nil {
			return err
		}
		k, v, _ := strings.Cut(pair, "=")
		d.addForm(formUnescape(k), func() string { return formUnescape(v) })
	}
	return nil
}

// multipart reads a multipart/form-data body. Parts with a filename
// parameter are files (the first of a name wins), the others are form
// fields. Transfer encodings are not applied, as Werkzeug does not.
func (d *paramDecoder) multipart(body io.Reader, boundary string) error {
	if boundary == "" {
		return apierr.New(apierr.Parameter, "multipart body without a boundary")
	}
	cr := &countingReader{r: body}
	mr := multipart.NewReader(cr, boundary)
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF || err != nil && cr.n == 0 {
			// The closing boundary, or an empty body: no (more) fields.
			if err := cr.err; err != nil && err != io.EOF {
				return bodyError(err, "malformed multipart body")
			}
			return nil
		}
		if err != nil {
			return bodyError(err, "malformed multipart body")
		}
		if err := d.count(1); err != nil {
			return err
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return bodyError(err, "malformed multipart body")
		}
		disposition, dp, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err != nil || disposition != "form-data" || dp["name"] == "" {
			continue
		}
		name := validUTF8(dp["name"])
		if filename, ok := dp["filename"]; ok {
			if d.p.files == nil {
				d.p.files = make(map[string]upload)
			}
			if _, dup := d.p.files[name]; !dup {
				d.p.files[name] = upload{data: data, filename: validUTF8(filename)}
			}
			continue
		}
		d.addForm(name, func() string { return pyUTF8(data) })
	}
}

// json reads a JSON body: one object, nothing after it, at most
// maxJSONDepth levels deep, in UTF-8 (an initial byte order mark is
// skipped, as Python's json.loads does). An empty body has no parameters.
func (d *paramDecoder) json(body []byte) error {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimLeft(body, jsonSpace)) == 0 {
		return nil
	}
	if !utf8.Valid(body) {
		return apierr.New(apierr.Parameter, "the JSON body is not valid UTF-8")
	}
	if jsonTooDeep(body, maxJSONDepth) {
		return apierr.Newf(apierr.Parameter, "the JSON body is nested too deeply (more than %d levels)", maxJSONDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return apierr.New(apierr.Parameter, "the JSON body is not valid JSON").Wrap(err)
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], jsonSpace); len(rest) > 0 {
		return apierr.New(apierr.Parameter, "the JSON body has data after its end")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return apierr.New(apierr.Parameter, "the JSON body must be an object")
	}
	if err := d.count(len(obj)); err != nil {
		return err
	}
	maps.Copy(d.p.values, obj)
	return nil
}

// jsonSpace is JSON's insignificant whitespace.
const jsonSpace = " \t\r\n"

// jsonTooDeep reports whether b nests arrays and objects deeper than max.
// It only counts brackets outside strings; the decoder judges validity.
func jsonTooDeep(b []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// bodyType is how decodeParams treats a body.
type bodyType int

const (
	bodyIgnored bodyType = iota
	bodyForm
	bodyMultipart
	bodyJSON
)

// classifyBody maps a Content-Type to a bodyType, as Flask and Werkzeug do:
// urlencoded and multipart are forms, application/json and
// application/*+json are JSON (a charset parameter is ignored: JSON is
// UTF-8), anything else is not read.
func classifyBody(contentType string) (bodyType, map[string]string) {
	switch {
	case contentType == "":
		return bodyIgnored, nil
	case strings.EqualFold(contentType, "application/x-www-form-urlencoded"):
		return bodyForm, nil // what PAM, LWP and requests send; skips the parser
	}
	mt, ps, err := mime.ParseMediaType(contentType)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		return bodyIgnored, nil
	}
	switch {
	case mt == "application/x-www-form-urlencoded":
		return bodyForm, ps
	case mt == "multipart/form-data":
		return bodyMultipart, ps
	case mt == "application/json",
		strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		return bodyJSON, ps
	}
	return bodyIgnored, nil
}

// checkContentEncoding refuses compressed bodies (reliability.md B2).
func checkContentEncoding(h http.Header) error {
	for _, v := range h.Values("Content-Encoding") {
		for enc := range strings.SplitSeq(v, ",") {
			enc = strings.TrimSpace(enc)
			if enc != "" && !strings.EqualFold(enc, "identity") {
				if len(enc) > 32 {
					enc = enc[:32]
				}
				return apierr.Newf(apierr.Parameter, "Content-Encoding %q is not supported", enc)
			}
		}
	}
	return nil
}

// wantsUnquote reports whether values get the second percent-decoding: yes
// unless the product name of the User-Agent (before the first '/') is one
// of noUnquoteAgents. A missing User-Agent means yes.
func wantsUnquote(userAgent string) bool {
	product, _, _ := strings.Cut(userAgent, "/")
	product = strings.TrimSpace(product)
	for _, a := range noUnquoteAgents {
		if strings.EqualFold(product, a) {
			return false
		}
	}
	return true
}

// readAll reads r to the end; size, when positive, is the expected length.
func readAll(r io.Reader, size int64) ([]byte, error) {
	n := 512
	if size > 0 {
		n = int(size) + 1 // room to see EOF without growing
	}
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, bodyError(err, "the request body could not be read")
		}
	}
}

// countingReader counts the bytes read and keeps the last read error.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

// bodyError turns a read error into a Parameter error; an exceeded limit
// and a body that did not arrive within the server's read timeout get
// their own texts.
func bodyError(err error, msg string) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return errBodyTooLarge()
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return apierr.New(apierr.Parameter, "the request body did not arrive in time").Wrap(err)
	}
	return apierr.New(apierr.Parameter, msg).Wrap(err)
}

func errBodyTooLarge() error {
	return apierr.New(apierr.Parameter, "request body too large")
}

// unquote is Python's urllib.parse.unquote: only %XX with two hex digits
// is decoded, invalid % sequences stay as they are, '+' stays '+', decoded
// bytes are read as UTF-8 with each maximal invalid subpart replaced by
// U+FFFD, and other characters pass unchanged. It is the second decoding
// of form and query values. Invalid UTF-8 in s is replaced first.
func unquote(s string) string { return percentDecode(s, false) }

// formUnescape is one application/x-www-form-urlencoded decoding as Python's
// parse_qsl does it: '+' is a space, then unquote.
func formUnescape(s string) string { return percentDecode(s, true) }

func percentDecode(s string, plus bool) string {
	i := 0
	for i < len(s) && s[i] != '%' && (!plus || s[i] != '+') {
		i++
	}
	if i == len(s) {
		return validUTF8(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		case c == '+' && plus:
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return validUTF8(b.String())
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// validUTF8 returns s, with invalid UTF-8 replaced as pyUTF8 does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(appendPyUTF8(make([]byte, 0, len(s)+8), []byte(s)))
}

// pyUTF8 decodes b as Python's bytes.decode("utf-8", "replace").
func pyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(appendPyUTF8(make([]byte, 0, len(b)+8), b))
}

// appendPyUTF8 appends b to dst, replacing every maximal subpart of an
// ill-formed sequence with one U+FFFD (Unicode §3.9, the practice CPython
// follows). Go's own decoders replace byte by byte instead, which differs
// for truncated sequences such as E2 82.
func appendPyUTF8(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			dst = append(dst, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, b[i:i+n]...)
			i += n
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += maximalSubpart(b[i:])
	}
	return dst
}

// maximalSubpart returns the length of the maximal subpart at the start of
// b, which begins with an ill-formed sequence: the lead byte and the
// continuation bytes that could still have completed it.
func maximalSubpart(b []byte) int {
	need := 0
	lo, hi := byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case 0xC2 <= c && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case 0xE1 <= c && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case 0xF1 <= c && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	}
	n := 1
	for n <= need && n < len(b) && lo <= b[n] && b[n] <= hi {
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// has reports whether key was given (with any value, even empty or null).
func (p *params) has(key string) bool {
	_, ok := p.values[key]
	return ok
}

// raw returns the value of key as decoded: a string for query, form and
// path values; a JSON value (string, json.Number, bool, nil, []any,
// map[string]any) for JSON keys.
func (p *params) raw(key string) (any, bool) {
	v, ok := p.values[key]
	return v, ok
}

// str returns key as a string: "" when missing, a JSON number as its
// literal text. Other JSON types are a Parameter error.
func (p *params) str(key string) (string, error) {
	v, ok := p.values[key]
	if !ok {
		return "", nil
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	}
	return "", typeError(key, "a string")
}

// required is str for a parameter that must be given: missing, null or ""
// is apierr.MissingParameter (privacyIDEA treats None as missing).
func (p *params) required(key string) (string, error) {
	if v, ok := p.values[key]; !ok || v == nil {
		return "", apierr.MissingParameter(key)
	}
	s, err := p.str(key)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", apierr.MissingParameter(key)
	}
	return s, nil
}

// boolean is privacyIDEA's is_true: true for 1, "1", true, "True", "true"
// and "TRUE" (a JSON number counts when it equals 1, as 1.0 == 1 in
// Python); everything else, missing and null included, is false. Arrays and
// objects are a Parameter error.
func (p *params) boolean(key string) (bool, error) {
	switch v := p.values[key].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		return v == "1" || v == "true" || v == "True" || v == "TRUE", nil
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 1, nil
	}
	return false, typeError(key, "a boolean")
}

// integer parses key as a decimal integer (an optional sign and digits,
// nothing else); missing, null or "" gives def.
func (p *params) integer(key string, def int) (int, error) {
	var s string
	switch v := p.values[key].(type) {
	case nil:
		return def, nil
	case string:
		s = v
	case json.Number:
		s = v.String()
	default:
		return 0, typeError(key, "an integer")
	}
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if errors.Is(err, strconv.ErrRange) {
		return 0, apierr.New(apierr.Parameter, "Parameter "+key+" is out of range.")
	}
	if err != nil {
		return 0, typeError(key, "an integer")
	}
	return n, nil
}

// list returns key as a list, as privacyIDEA's to_list_param does: a JSON
// array of strings (numbers as their text) or a comma separated string;
// entries are trimmed and empty ones dropped. Missing or null gives nil, a
// given but blank value an empty, non-nil list.
func (p *params) list(key string) ([]string, error) {
	var items []string
	switch v := p.values[key].(type) {
	case nil:
		return nil, nil
	case string:
		items = strings.Split(v, ",")
	case json.Number:
		items = []string{v.String()}
	case []any:
		items = make([]string, 0, len(v))
		for _, e := range v {
			switch e := e.(type) {
			case string:
				items = append(items, e)
			case json.Number:
				items = append(items, e.String())
			default:
				return nil, typeError(key, "a list of strings")
			}
		}
	default:
		return nil, typeError(key, "a list of strings")
	}
	out := make([]string, 0, len(items))
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// keys returns the parameter names, sorted.
func (p *params) keys() []string {
	keys := make([]string, 0, len(p.values))
	for k := range p.values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// prefixed returns the parameters whose names start with prefix, keyed by
// the rest of the name (a name equal to prefix is left out), for
// privacyIDEA's "type.x"/"desc.x"/"priority.x" style groups.
func (p *params) prefixed(prefix string) map[string]any {
	out := make(map[string]any)
	for k, v := range p.values {
		if len(k) > len(prefix) && strings.HasPrefix(k, prefix) {
			out[k[len(prefix):]] = v
		}
	}
	return out
}

// file returns the multipart file part called name.
func (p *params) file(name string) (data []byte, filename string, ok bool) {
	f, ok := p.files[name]
	return f.data, f.filename, ok
}

// set stores v under key, replacing any value; v should be a string or a
// JSON value as raw describes. Handlers use it to impose values, such as
// the user of a user-role caller.
func (p *params) set(key string, v any) {
	if p.values == nil {
		p.values = make(map[string]any)
	}
	p.values[key] = v
}

// String lists the parameter and file names, never a value: values hold
// passwords and OTPs. It has a value receiver so that printing a params
// value (not only a pointer) is redacted too.
func (p params) String() string {
	var b strings.Builder
	b.WriteString("params{")
	for i, k := range p.keys() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Quote(k))
	}
	if len(p.files) > 0 {
		b.WriteString(" files:")
		for _, k := range slices.Sorted(maps.Keys(p.files)) {
			b.WriteByte(' ')
			b.WriteString(strconv.Quote(k))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// GoString makes %#v redacted as well.
func (p params) GoString() string { return p.String() }

func typeError(key, want string) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf("Parameter %s must be %s.", key, want))
}
