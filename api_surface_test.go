package authsrv_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// internalPrefix is where the module's internal packages live; their types
// cannot be named outside the module, so they must not appear in its public
// API.
const internalPrefix = module + "/internal/"

// publicPackages type-checks the module's non-internal library packages
// from their compiled export data (go list -export) and returns them.
func publicPackages(t *testing.T) []*types.Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}\t{{.Name}}\t{{.Module}}", "./...")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, errb.String())
	}
	exports := map[string]string{}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q", sc.Text())
		}
		path, export, name, mod := f[0], f[1], f[2], f[3]
		exports[path] = export
		if mod == module && name != "main" && !isInternal(path) {
			paths = append(paths, path)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var pkgs []*types.Package
	for _, p := range paths {
		pkg, err := imp.Import(p)
		if err != nil {
			t.Fatalf("import %s: %v", p, err)
		}
		pkgs = append(pkgs, pkg)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d public packages", len(pkgs))
	}
	return pkgs
}

func isInternal(path string) bool {
	return strings.HasPrefix(path+"/", internalPrefix) || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// internalTypes lists the internal types that typ mentions.
func internalTypes(typ types.Type) []string {
	var found []string
	seen := map[types.Type]bool{}
	var walk func(types.Type)
	walk = func(typ types.Type) {
		if typ == nil || seen[typ] {
			return
		}
		seen[typ] = true
		switch t := typ.(type) {
		case *types.Alias:
			if obj := t.Obj(); obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
				found = append(found, obj.Pkg().Path()+"."+obj.Name())
			}
			walk(types.Unalias(t))
		case *types.Named:
			if obj := t.Obj(); obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
				found = append(found, obj.Pkg().Path()+"."+obj.Name())
			}
			for i := range t.TypeArgs().Len() {
				walk(t.TypeArgs().At(i))
			}
		case *types.Pointer:
			walk(t.Elem())
		case *types.Slice:
			walk(t.Elem())
		case *types.Array:
			walk(t.Elem())
		case *types.Chan:
			walk(t.Elem())
		case *types.Map:
			walk(t.Key())
			walk(t.Elem())
		case *types.Signature:
			for i := range t.Params().Len() {
				walk(t.Params().At(i).Type())
			}
			for i := range t.Results().Len() {
				walk(t.Results().At(i).Type())
			}
		case *types.Struct:
			for i := range t.NumFields() {
				if f := t.Field(i); f.Exported() {
					walk(f.Type())
				}
			}
		case *types.Interface:
			for i := range t.NumMethods() {
				if m := t.Method(i); m.Exported() {
					walk(m.Type())
				}
			}
			for i := range t.NumEmbeddeds() {
				walk(t.EmbeddedType(i))
			}
		case *types.TypeParam:
			walk(t.Constraint())
		case *types.Union:
			for i := range t.Len() {
				walk(t.Term(i).Type())
			}
		}
	}
	walk(typ)
	return found
}

// apiHits lists every exported identifier of pkg whose signature mentions
// an internal type, as "pkg.Name: internal types".
func apiHits(pkg *types.Package) []string {
	var hits []string
	report := func(name string, typ types.Type) {
		if in := internalTypes(typ); len(in) > 0 {
			slices.Sort(in)
			hits = append(hits, fmt.Sprintf("%s.%s: %s", pkg.Path(), name, strings.Join(slices.Compact(in), ", ")))
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Func, *types.Var, *types.Const:
			report(name, o.Type())
		case *types.TypeName:
			if o.IsAlias() {
				report(name, o.Type())
				continue
			}
			named, ok := o.Type().(*types.Named)
			if !ok {
				continue
			}
			report(name, named.Underlying())
			for i := range named.TypeParams().Len() {
				report(name, named.TypeParams().At(i).Constraint())
			}
			ms := types.NewMethodSet(types.NewPointer(named))
			for i := range ms.Len() {
				if m := ms.At(i).Obj(); m.Exported() {
					report(name+"."+m.Name(), m.Type())
				}
			}
		}
	}
	return hits
}

// TestNoInternalTypesInPublicAPI fails when an exported identifier outside
// internal/ (a function, a method of an exported type, an exported struct
// field, a variable, a constant, an alias or an interface method) has an
// internal type in its signature: a program outside the module could not
// name that type, so the identifier would be unusable.
func TestNoInternalTypesInPublicAPI(t *testing.T) {
	for _, pkg := range publicPackages(t) {
		for _, h := range apiHits(pkg) {
			t.Error(h)
		}
	}
}
