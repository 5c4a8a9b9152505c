package eventing

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/user"
)

// Actions of the manglers. privacyIDEA names the ResponseMangler's set
// "add"; both names are understood.
const (
	mangleDelete = "delete"
	mangleSet    = "set"
	mangleAdd    = "add"
)

// mangleAction is the definition's action in the form the manglers
// compare (privacyIDEA ignores its case); "add" is set.
func mangleAction(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	if a == mangleAdd {
		return mangleSet
	}
	return a
}

// requestMangler is the RequestMangler module: it deletes or sets request
// parameters (Call.Params). At pre it changes what the operation reads (as
// far as the operation takes changed parameters, see the root's
// documentation); at post it changes only what the following handlers see.
//
// set with match_parameter and match_pattern sets the parameter only when
// the pattern matches the whole value of match_parameter; the value's
// {0}, {1}, ... are the pattern's groups ({{ and }} are literal braces; a
// group that took no part in the match is empty). The pattern is a Go
// regular expression (RE2), which lacks Python's backreferences and
// lookarounds. Without match_parameter the value is set as it is (a
// missing value sets the empty string).
//
// reset_user (privacyIDEA's GUI stores it so; its code reads
// reset_username, which is also understood): when the changed parameter is
// user, username or realm, the call's user becomes the one the changed
// parameters name, unresolved, so the following handlers resolve it anew
// (Run.User) instead of seeing the user of the original request. The
// operation itself always reads the parameters.
type requestMangler struct{ s *Service }

var _ Module = (*requestMangler)(nil)

func newRequestMangler(s *Service) Module { return &requestMangler{s: s} }

func (m *requestMangler) Name() string { return "RequestMangler" }

// Positions: usually pre, so that the operation reads the changed
// parameters; at post the following handlers see them.
func (m *requestMangler) Positions() []string { return []string{Post, Pre} }
func (m *requestMangler) DefaultAbort() bool  { return false }

func (m *requestMangler) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{
		mangleDelete: {
			"parameter": {Type: "str", Required: true, Description: "The parameter that should be deleted."},
		},
		mangleSet: {
			"parameter": {Type: "str", Required: true, Description: "The parameter that should be added or changed."},
			"value": {Type: "str", Required: true,
				Description: "The new value of the parameter. {0}, {1}, ... stand for the groups of match_pattern."},
			"match_parameter": {Type: "str",
				Description: "Set the parameter only when this parameter matches match_pattern."},
			"match_pattern": {Type: "str",
				Description: "A regular expression the whole value of match_parameter must match; its groups '()' go into the value."},
			"reset_user": {Type: "bool",
				Description: "When the parameter is user, username or realm, the following handlers see the user the changed parameters name."},
		},
	}, nil
}

func (m *requestMangler) Check(_ context.Context, d Definition) error {
	act := mangleAction(d.Action)
	if act != mangleDelete && act != mangleSet {
		return paramErr("Unknown action of the RequestMangler: " + d.Action)
	}
	if strings.TrimSpace(d.Options["parameter"]) == "" {
		return paramErr("Missing option: parameter")
	}
	if act == mangleDelete {
		return nil
	}
	mp, pat := d.Options["match_parameter"], d.Options["match_pattern"]
	if mp == "" {
		return nil
	}
	if pat == "" {
		return paramErr("The option match_pattern is required with match_parameter.")
	}
	re, err := compileWhole(pat)
	if err != nil {
		return paramErr("The option match_pattern is not a valid regular expression.")
	}
	if _, err := formatGroups(d.Options["value"], make([]string, re.NumSubexp())); err != nil {
		return paramErr("The option value " + err.Error() + ".")
	}
	return nil
}

// compileWhole compiles pat to match a whole value.
func compileWhole(pat string) (*regexp.Regexp, error) { return regexp.Compile("^(?:" + pat + ")$") }

func (m *requestMangler) Do(_ context.Context, r *Run) error {
	opts := r.Def.Options
	param := strings.TrimSpace(opts["parameter"])
	if param == "" {
		return paramErr("Missing option: parameter")
	}
	c := r.Call
	switch mangleAction(r.Def.Action) {
	case mangleDelete:
		delete(c.Params, param)
		return nil
	case mangleSet:
	default:
		return paramErr("Unknown action of the RequestMangler: " + r.Def.Action)
	}
	value := opts["value"]
	if mp := opts["match_parameter"]; mp != "" {
		if _, ok := c.Params[mp]; !ok {
			return nil
		}
		pat := opts["match_pattern"]
		if pat == "" {
			return nil
		}
		re, err := compileWhole(pat)
		if err != nil {
			return paramErr("The option match_pattern is not a valid regular expression.")
		}
		groups := re.FindStringSubmatch(c.Param(mp))
		if groups == nil {
			return nil
		}
		if value, err = formatGroups(value, groups[1:]); err != nil {
			return paramErr("The option value " + err.Error() + ".")
		}
	}
	if c.Params == nil {
		c.Params = map[string]any{}
	}
	c.Params[param] = value
	if (IsTrue(opts["reset_user"]) || IsTrue(opts["reset_username"])) &&
		(param == "user" || param == "username" || param == "realm") {
		login := c.Param("user")
		if login == "" {
			login = c.Param("username")
		}
		c.User = user.User{Login: login, Realm: c.Param("realm")}
		if f := r.facts; f != nil {
			f.userDone, f.usr = false, user.User{}
			f.infoDone, f.info = false, nil
			f.tokenDone, f.tok = false, nil
		}
	}
	return nil
}

// formatGroups replaces {0}, {1}, ... in value by the groups; {{ and }}
// are literal braces, other text in braces stays as it is.
func formatGroups(value string, groups []string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(value); i++ {
		ch := value[i]
		switch {
		case ch == '{' && i+1 < len(value) && value[i+1] == '{':
			b.WriteByte('{')
			i++
		case ch == '}' && i+1 < len(value) && value[i+1] == '}':
			b.WriteByte('}')
			i++
		case ch == '{':
			end := strings.IndexByte(value[i+1:], '}')
			if end <= 0 {
				b.WriteByte(ch)
				continue
			}
			tag := value[i+1 : i+1+end]
			n, err := strconv.Atoi(tag)
			if err != nil || n < 0 || strings.ContainsAny(tag, "+-") {
				b.WriteByte(ch)
				continue
			}
			if n >= len(groups) {
				return "", fmt.Errorf("refers to group {%d}, but match_pattern has %d groups", n, len(groups))
			}
			b.WriteString(groups[n])
			i += end + 1
		default:
			b.WriteByte(ch)
		}
	}
	return b.String(), nil
}

// responseMangler is the ResponseMangler module: it deletes or sets a
// member of the response envelope, named by a JSON pointer (RFC 6901:
// "/detail/message", "~1" for "/" and "~0" for "~" in a name, decimal
// indexes for arrays).
//
// Decisions where privacyIDEA differs or is silent:
//   - The pointer must name something below /result or /detail, since
//     only those are the operation's (id, version, time and signature are
//     the server's): /result/status, /result/value and below it,
//     /result/error (delete only), /result/error/code and
//     /result/error/message; /detail/<name> and below. Other pointers are
//     refused when the definition is stored. privacyIDEA accepts only one
//     to three levels; any depth is accepted here.
//   - set creates missing intermediate objects (as privacyIDEA does within
//     its three levels), but never replaces a value that is not an object
//     or array on the way: that fails. On an array, set replaces the
//     element at an existing index, and "-" appends.
//   - delete of a member that does not exist fails the handler (audited;
//     the operation goes on unless abort_on_error), where privacyIDEA only
//     logs it.
//   - type integer with a value that is not an integer is refused when
//     the definition is stored; type bool is true for 1 and true (any
//     case), false otherwise; no type is string.
//   - After a change, /result/status is true only for a true boolean (or a
//     value IsTrue takes as true), /result/error/code is a number.
type responseMangler struct{ s *Service }

var _ Module = (*responseMangler)(nil)

func newResponseMangler(s *Service) Module { return &responseMangler{s: s} }

func (m *responseMangler) Name() string        { return "ResponseMangler" }
func (m *responseMangler) Positions() []string { return []string{Post} }
func (m *responseMangler) DefaultAbort() bool  { return false }

// The value types of set.
var mangleTypes = []string{"string", "integer", "bool"}

func (m *responseMangler) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{
		mangleDelete: {
			"JSON pointer": {Type: "str", Required: true,
				Description: "The JSON pointer of the member that should be deleted, like '/detail/message'."},
		},
		mangleSet: {
			"JSON pointer": {Type: "str", Required: true,
				Description: "The JSON pointer of the member that should be set, like '/detail/message'."},
			"type":  {Type: "str", Required: true, Description: "The type of the value.", Value: slices.Clone(mangleTypes)},
			"value": {Type: "str", Required: true, Description: "The value of the member."},
		},
	}, nil
}

func (m *responseMangler) Check(_ context.Context, d Definition) error {
	act := mangleAction(d.Action)
	if act != mangleDelete && act != mangleSet {
		return paramErr("Unknown action of the ResponseMangler: " + d.Action)
	}
	if _, err := parsePointer(d.Options["JSON pointer"], act); err != nil {
		return err
	}
	if act == mangleSet {
		if _, err := mangleValue(d.Options["type"], d.Options["value"]); err != nil {
			return err
		}
	}
	return nil
}

// parsePointer splits a JSON pointer into its unescaped names and checks
// that action act may change it.
func parsePointer(p, act string) ([]string, error) {
	if p == "" {
		return nil, paramErr("Missing option: JSON pointer")
	}
	if !strings.HasPrefix(p, "/") {
		return nil, paramErr("The JSON pointer must start with '/', like '/detail/message'.")
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, paramErr("The JSON pointer has a '~' that is not followed by 0 or 1.")
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	if len(parts) < 2 || (parts[0] != "result" && parts[0] != "detail") {
		return nil, paramErr("The JSON pointer must name a member below /result or /detail, like '/detail/message'.")
	}
	if parts[0] == "result" {
		ok := false
		switch parts[1] {
		case "status":
			ok = len(parts) == 2
		case "value":
			ok = true
		case "error":
			ok = (len(parts) == 2 && act == mangleDelete) ||
				(len(parts) == 3 && (parts[2] == "code" || parts[2] == "message"))
		}
		if !ok {
			return nil, paramErr("The JSON pointer may name /result/status, /result/value, /result/error/code or /result/error/message below /result.")
		}
	}
	return parts, nil
}

// mangleValue converts value to typ.
func mangleValue(typ, value string) (any, error) {
	switch strings.ToLower(strings.TrimSpace(typ)) {
	case "", "string", "str":
		return value, nil
	case "integer", "int":
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil {
			return nil, paramErr("The value is not an integer.")
		}
		return n, nil
	case "bool":
		return IsTrue(value), nil
	}
	return nil, paramErr("The type must be string, integer or bool.")
}

func (m *responseMangler) Do(_ context.Context, r *Run) error {
	res := r.Call.Response
	if res == nil {
		return nil
	}
	act := mangleAction(r.Def.Action)
	if act != mangleDelete && act != mangleSet {
		return paramErr("Unknown action of the ResponseMangler: " + r.Def.Action)
	}
	ptr := r.Def.Options["JSON pointer"]
	parts, err := parsePointer(ptr, act)
	if err != nil {
		return err
	}
	result := map[string]any{"status": res.Status, "value": res.Value}
	if res.Error != nil {
		result["error"] = map[string]any{"code": res.Error.Code, "message": res.Error.Message}
	}
	var top any = result
	if parts[0] == "detail" {
		top = nil
		if res.Detail != nil {
			top = res.Detail
		}
	}
	if act == mangleDelete {
		top, err = pointerDelete(top, parts[1:])
	} else {
		var v any
		if v, err = mangleValue(r.Def.Options["type"], r.Def.Options["value"]); err == nil {
			top, err = pointerSet(top, parts[1:], v)
		}
	}
	if err != nil {
		return apierr.New(apierr.Parameter, "The JSON pointer "+ptr+" "+err.Error()+".")
	}
	if parts[0] == "detail" {
		res.Detail = top.(map[string]any)
	} else {
		writeResult(res, top.(map[string]any))
	}
	res.Changed = true
	return nil
}

// writeResult writes the result view back into res.
func writeResult(res *Response, result map[string]any) {
	switch s := result["status"].(type) {
	case bool:
		res.Status = s
	default:
		res.Status = IsTrue(s)
	}
	res.Value = result["value"]
	e, ok := result["error"].(map[string]any)
	if !ok {
		res.Error = nil
		return
	}
	re := &ResponseError{Message: toString(e["message"])}
	switch c := e["code"].(type) {
	case int:
		re.Code = c
	case int64:
		re.Code = int(c)
	case float64:
		re.Code = int(c)
	case string:
		re.Code, _ = strconv.Atoi(strings.TrimSpace(c))
	}
	res.Error = re
}

// pointerErr is why a pointer cannot be applied (completed by the
// caller into "The JSON pointer /x <reason>.").
type pointerErr string

func (e pointerErr) Error() string { return string(e) }

const (
	errPointerMissing  = pointerErr("does not exist in the response")
	errPointerNotInner = pointerErr("passes through a value that is neither an object nor an array")
)

// plain returns node as the JSON decoder would give it (maps, slices,
// float64 numbers), so that a pointer can walk into it: the operations
// put typed values ([]string, structs) into their details.
func plain(node any) (any, bool) {
	switch node.(type) {
	case map[string]any, []any:
		return node, true
	case nil, string, bool, int, int64, float64:
		return node, false
	}
	b, err := json.Marshal(node)
	if err != nil {
		return node, false
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return node, false
	}
	switch out.(type) {
	case map[string]any, []any:
		return out, true
	}
	return node, false
}

// arrayIndex parses an RFC 6901 array index (no leading zeros, no sign).
func arrayIndex(s string, n int) (int, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i < n
}

// pointerDelete returns node without the member at path (non-empty). node
// is changed only when the whole path exists.
func pointerDelete(node any, path []string) (any, error) {
	node, ok := plain(node)
	if !ok {
		return nil, errPointerMissing
	}
	k := path[0]
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[k]
		if !ok {
			return nil, errPointerMissing
		}
		if len(path) == 1 {
			delete(n, k)
			return n, nil
		}
		nc, err := pointerDelete(child, path[1:])
		if err != nil {
			return nil, err
		}
		n[k] = nc
		return n, nil
	case []any:
		i, ok := arrayIndex(k, len(n))
		if !ok {
			return nil, errPointerMissing
		}
		if len(path) == 1 {
			return slices.Delete(n, i, i+1), nil
		}
		nc, err := pointerDelete(n[i], path[1:])
		if err != nil {
			return nil, err
		}
		n[i] = nc
		return n, nil
	}
	return nil, errPointerMissing
}

// pointerSet returns node with v at path (non-empty), creating missing
// objects on the way. node is changed only when the value can be set.
func pointerSet(node any, path []string, v any) (any, error) {
	if node == nil {
		node = map[string]any{}
	}
	node, ok := plain(node)
	if !ok {
		return nil, errPointerNotInner
	}
	k := path[0]
	switch n := node.(type) {
	case map[string]any:
		if n == nil {
			n = map[string]any{}
		}
		if len(path) == 1 {
			n[k] = v
			return n, nil
		}
		nc, err := pointerSet(n[k], path[1:], v)
		if err != nil {
			return nil, err
		}
		n[k] = nc
		return n, nil
	case []any:
		if k == "-" {
			if len(path) > 1 {
				return nil, errPointerMissing
			}
			return append(n, v), nil
		}
		i, ok := arrayIndex(k, len(n))
		if !ok {
			return nil, errPointerMissing
		}
		if len(path) == 1 {
			n[i] = v
			return n, nil
		}
		nc, err := pointerSet(n[i], path[1:], v)
		if err != nil {
			return nil, err
		}
		n[i] = nc
		return n, nil
	}
	return nil, errPointerNotInner
}
