package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// configUsage is the -config flag's help.
const configUsage = "YAML file of flag values (keys: the flag names of \"authsrv serve -h\"; KEY_file: PATH reads a value from a file); flags and AUTHSRV_* win over it"

// configFileSuffix marks a key whose value is read from a file: the
// value of "KEY_file: PATH" is PATH's content less one trailing newline.
const configFileSuffix = "_file"

// errCaptured stops parse once it handed its FlagSet to captureFlags.
var errCaptured = errors.New("flags captured")

// serveFlagSet returns serve's FlagSet with every flag defined and none
// set: the keys a configuration file may hold.
func serveFlagSet() *flag.FlagSet {
	var fs *flag.FlagSet
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	e.captureFlags = func(f *flag.FlagSet) { fs = f }
	if err := e.serve(nil); !errors.Is(err, errCaptured) {
		panic(fmt.Sprintf("serveFlagSet: %v", err)) // a programming error
	}
	return fs
}

// configEntry is one key of a configuration file, with its values (more
// than one for a repeatable flag given as a list).
type configEntry struct {
	key    string // as written, e.g. "tls-key" or "tls-key_file"
	flag   string // the flag it sets, e.g. "tls-key"
	line   int
	values []string
}

// configError names the file, the line and the key of a problem.
type configError struct {
	file string
	line int
	key  string
	msg  string
}

func (c *configError) Error() string {
	if c.key == "" {
		return fmt.Sprintf("%s line %d: %s", c.file, c.line, c.msg)
	}
	return fmt.Sprintf("%s line %d: key %q: %s", c.file, c.line, c.key, c.msg)
}

// repeatable reports whether f may be given several times (a list in the
// file). TestConfigRepeatableFlags finds a repeatable flag missing here.
func repeatable(f *flag.Flag) bool {
	switch f.Value.(type) {
	case *rootList, *dialList:
		return true
	}
	return false
}

// isBoolFlag reports whether f is a boolean flag.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// readConfig reads and checks the file's structure against known (serve's
// flags): a single mapping of known keys to values of the right shape,
// each key once, KEY_file read. Values are checked by setting them.
func readConfig(path string, known *flag.FlagSet) ([]configEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // names the file
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file sets nothing
		}
		return nil, fmt.Errorf("%s: %w", path, err) // yaml names the line
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &configError{file: path, line: more.Line, msg: "a second YAML document; want one"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, &configError{file: path, line: root.Line, msg: "want a mapping of flag names to values"}
	}
	var out []configEntry
	seen := map[string]int{} // flag name -> line
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		cerr := func(msg string) error { return &configError{file: path, line: k.Line, key: k.Value, msg: msg} }
		if k.Kind != yaml.ScalarNode {
			return nil, &configError{file: path, line: k.Line, msg: "a key that is not a flag name"}
		}
		name, fromFile := k.Value, false
		if known.Lookup(name) == nil && strings.HasSuffix(name, configFileSuffix) {
			name, fromFile = strings.TrimSuffix(name, configFileSuffix), true
		}
		f := known.Lookup(name)
		if f == nil || name == "config" {
			return nil, cerr(`unknown key (want a flag name of "authsrv serve -h", without the dash, or FLAG_file)`)
		}
		if first, dup := seen[name]; dup {
			return nil, cerr(fmt.Sprintf("the flag -%s is already set on line %d", name, first))
		}
		seen[name] = k.Line
		e := configEntry{key: k.Value, flag: name, line: k.Line}
		var scalars []*yaml.Node
		switch v.Kind {
		case yaml.ScalarNode:
			scalars = []*yaml.Node{v}
		case yaml.SequenceNode:
			if !repeatable(f) || fromFile {
				return nil, cerr("a list, but the flag takes one value")
			}
			scalars = v.Content
		default:
			return nil, cerr("want a single value" + map[bool]string{true: " or a list", false: ""}[repeatable(f) && !fromFile])
		}
		for _, s := range scalars {
			if s.Kind != yaml.ScalarNode {
				return nil, &configError{file: path, line: s.Line, key: k.Value, msg: "want a single value in the list"}
			}
			switch {
			case s.Tag == "!!null":
				return nil, &configError{file: path, line: s.Line, key: k.Value, msg: "no value"}
			case fromFile:
				if s.Tag != "!!str" {
					return nil, cerr("want a file name")
				}
				b, err := os.ReadFile(s.Value)
				if err != nil {
					return nil, cerr(err.Error())
				}
				val := strings.TrimSuffix(string(b), "\n")
				e.values = append(e.values, strings.TrimSuffix(val, "\r"))
			case isBoolFlag(f) && s.Tag != "!!bool":
				return nil, cerr(fmt.Sprintf("want true or false, not %q", s.Value))
			case !isBoolFlag(f) && s.Tag == "!!bool":
				return nil, cerr(fmt.Sprintf("want a %s, not a boolean", kindOf(f)))
			default:
				e.values = append(e.values, s.Value)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// kindOf names what a non-boolean flag takes, for error messages.
func kindOf(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64, uint, uint64, float64:
			return "number"
		case time.Duration:
			return "duration"
		}
	}
	return "value"
}

// setConfig sets fs's flags from entries, skipping the flags in skip
// (given on the command line or in the environment) and those fs lacks (a
// serve flag in a command that does not have it). A value a flag refuses
// is an error naming the key and line, never the value (it may be a
// secret).
func setConfig(fs *flag.FlagSet, path string, entries []configEntry, skip map[string]bool) error {
	for _, e := range entries {
		if skip[e.flag] || fs.Lookup(e.flag) == nil {
			continue
		}
		for _, v := range e.values {
			if err := fs.Set(e.flag, v); err != nil {
				msg := err.Error()
				if strings.HasSuffix(e.key, configFileSuffix) {
					msg = "the file's content is not a valid value for -" + e.flag
				}
				return &configError{file: path, line: e.line, key: e.key, msg: msg}
			}
		}
	}
	return nil
}

// applyConfig fills the flags of fs that neither the command line nor the
// environment set from the -config file (or AUTHSRV_CONFIG), if any.
func (e *env) applyConfig(fs *flag.FlagSet) error {
	cf := fs.Lookup("config")
	if cf == nil || cf.Value.String() == "" {
		return nil
	}
	path := cf.Value.String()
	entries, err := readConfig(path, serveFlagSet())
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return setConfig(fs, path, entries, given)
}

// configCmd is "config check FILE": it reads FILE as serve would and
// prints "ok", or fails naming the key and line of the first problem.
func (e *env) configCmd(args []string) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	cs := flag.NewFlagSet("authsrv config check", flag.ContinueOnError)
	cs.SetOutput(e.stderr)
	cs.Usage = func() {
		fmt.Fprint(cs.Output(), "usage: authsrv config check FILE\n\nChecks FILE as \"authsrv serve -config FILE\" reads it: every key a flag of\n\"authsrv serve -h\" (or FLAG_file), every value one the flag takes.\nPrints ok, or the first problem with its key and line (exit status 1).\n")
	}
	if err := cs.Parse(args[1:]); err != nil {
		return err
	}
	if cs.NArg() != 1 {
		cs.Usage()
		return errUsage
	}
	path := cs.Arg(0)
	fs := serveFlagSet()
	entries, err := readConfig(path, fs)
	if err == nil {
		err = setConfig(fs, path, entries, nil)
	}
	if err == nil {
		err = checkConfigValues(fs, path, entries)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "ok")
	return nil
}

// checkConfigValues checks what serve checks of single values before it
// starts, beyond what the flags' own parsing refuses: the log level and
// format, and that -tls-cert and -tls-key come together.
func checkConfigValues(fs *flag.FlagSet, path string, entries []configEntry) error {
	at := func(name, msg string) error {
		for _, e := range entries {
			if e.flag == name {
				return &configError{file: path, line: e.line, key: e.key, msg: msg}
			}
		}
		return fmt.Errorf("%s: %s", path, msg)
	}
	val := func(name string) string { return fs.Lookup(name).Value.String() }
	if _, err := newLogger(io.Discard, val("log-level"), "json"); err != nil {
		return at("log-level", err.Error())
	}
	if _, err := newLogger(io.Discard, "info", val("log-format")); err != nil {
		return at("log-format", err.Error())
	}
	if (val("tls-cert") == "") != (val("tls-key") == "") {
		name := "tls-cert"
		if val("tls-cert") == "" {
			name = "tls-key"
		}
		return at(name, "tls-cert and tls-key go together")
	}
	return nil
}
