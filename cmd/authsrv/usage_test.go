package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

func TestHelpListsCommands(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		t.Run(arg, func(t *testing.T) {
			code, out, errs := cli(t, nil, "", arg)
			if code != 0 || out != usage || errs != "" {
				t.Fatalf("code %d, stdout %q, stderr %q", code, out, errs)
			}
			lines := strings.Split(out, "\n")
			for _, c := range commands {
				found := false
				for _, l := range lines {
					if strings.HasPrefix(l, "  "+c.use+" ") && strings.HasSuffix(l, " "+c.does) {
						found = true
					}
				}
				if !found {
					t.Errorf("no line for %q", c.use)
				}
			}
		})
	}
	t.Run("unknown command", func(t *testing.T) {
		code, out, errs := cli(t, nil, "", "frobnicate")
		if code != 2 || out != "" || !strings.Contains(errs, `unknown command "frobnicate"`) || !strings.Contains(errs, usage) {
			t.Errorf("code %d, stdout %q, stderr %q", code, out, errs)
		}
	})
}

// TestUsageMatchesDispatch: every listed command runs (its -h exits 0),
// and every command run dispatches is listed.
func TestUsageMatchesDispatch(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range commands {
		if strings.Contains(c.does, "\n") || strings.Contains(c.use, "\n") {
			t.Errorf("%q takes more than one line", c.use)
		}
		words := strings.Fields(c.use)
		listed[words[0]] = true
		sub := []string{""}
		if len(words) > 1 && strings.ToLower(words[1]) == words[1] && !strings.HasPrefix(words[1], "[") {
			sub = strings.Split(words[1], "|")
		}
		for _, s := range sub {
			args := []string{words[0]}
			if s != "" {
				args = append(args, s)
			}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, _, errs := cli(t, nil, "", append(args, "-h")...)
				if code != 0 || strings.Contains(errs, "unknown command") {
					t.Errorf("%v -h: code %d, stderr %q", args, code, errs)
				}
			})
		}
	}

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var dispatched []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "run" {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok {
				return true
			}
			if id, ok := sw.Tag.(*ast.Ident); !ok || id.Name != "cmd" {
				return true
			}
			for _, st := range sw.Body.List {
				for _, e := range st.(*ast.CaseClause).List {
					if lit, ok := e.(*ast.BasicLit); ok {
						s, _ := strconv.Unquote(lit.Value)
						dispatched = append(dispatched, s)
					}
				}
			}
			return false
		})
		return false
	})
	if len(dispatched) < 5 {
		t.Fatalf("found only %v in run's switch", dispatched)
	}
	for _, name := range dispatched {
		if !strings.HasPrefix(name, "-") && !listed[name] {
			t.Errorf("command %q is dispatched but not in the list of authsrv -h", name)
		}
	}
}
