package authsrv_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
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
			// An alias is another name for its target: an internal alias
			// of a public type (internal/otp.Hash for otp.Hash) is usable
			// outside the module; its target decides.
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

// srcImporter type-checks packages from source strings, for the test of
// the checker itself.
type srcImporter struct {
	fset *token.FileSet
	src  map[string]string
	pkgs map[string]*types.Package
}

func (im *srcImporter) Import(path string) (*types.Package, error) {
	if p, ok := im.pkgs[path]; ok {
		return p, nil
	}
	src, ok := im.src[path]
	if !ok {
		return importer.Default().Import(path)
	}
	f, err := parser.ParseFile(im.fset, path+".go", src, 0)
	if err != nil {
		return nil, err
	}
	conf := types.Config{Importer: im}
	p, err := conf.Check(path, im.fset, []*ast.File{f}, nil)
	if err != nil {
		return nil, err
	}
	im.pkgs[path] = p
	return p, nil
}

// TestAPISurfaceCatches runs the checker on small packages: every kind of
// exported identifier that mentions an internal type is reported, and
// unexported ones, public aliases of public types and internal aliases of
// public types are not.
func TestAPISurfaceCatches(t *testing.T) {
	const internalSrc = `package secret
type Key struct{ B []byte }
type Public = int
`
	const head = "package pub\nimport \"" + internalPrefix + "secret\"\nvar _ secret.Key\n"
	tests := []struct {
		name, src string
		want      []string // the reported identifiers
	}{
		{"func param", "func F(k *secret.Key) {}", []string{"F"}},
		{"func result in a slice", "func F() []map[string]secret.Key { return nil }", []string{"F"}},
		{"method", "type T struct{}\nfunc (T) M(func(secret.Key)) {}", []string{"T.M"}},
		{"pointer method", "type T struct{}\nfunc (*T) M() chan secret.Key { return nil }", []string{"T.M"}},
		{"exported field", "type T struct{ K secret.Key }", []string{"T"}},
		{"unexported field", "type T struct{ k secret.Key }", nil},
		{"var", "var V secret.Key", []string{"V"}},
		{"alias", "type A = secret.Key", []string{"A"}},
		{"internal alias of a public type", "func F(secret.Public) {}", nil},
		{"interface method", "type I interface{ M() *secret.Key }", []string{"I"}},
		{"func type", "type H func(secret.Key) error", []string{"H"}},
		{"generic constraint", "type G[T interface{ *secret.Key }] struct{}", []string{"G"}},
		{"unexported func", "func f(secret.Key) {}", nil},
		{"method of an unexported type", "type t struct{}\nfunc (t) M(secret.Key) {}", nil},
		{"clean", "type T struct{ N int }\nfunc (T) M(s string) error { return nil }", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			im := &srcImporter{fset: token.NewFileSet(), pkgs: map[string]*types.Package{},
				src: map[string]string{internalPrefix + "secret": internalSrc, "example.com/pub": head + tc.src}}
			pkg, err := im.Import("example.com/pub")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range apiHits(pkg) {
				name, _, _ := strings.Cut(strings.TrimPrefix(h, "example.com/pub."), ":")
				got = append(got, name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("hits %q, want %q", got, tc.want)
			}
		})
	}
}
