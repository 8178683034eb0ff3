package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A test failed from a goroutine other than its own panics once the test
// has ended ("Fail in goroutine after TestX has completed"), which throws
// away every other result of its package and skips the cleanups that
// delete its namespaces; FailNow from another goroutine does not even stop
// the test. No go statement in a test file may call t.Fatal, t.FailNow or
// t.Skip, nor pass t to a helper of its package that does (directly or
// through another): such a helper returns its error instead, and the
// test's own goroutine fails on it.
func TestNoFatalFromGoroutines(t *testing.T) {
	var bad []string
	for _, files := range testFiles(t, "../..") {
		fset := token.NewFileSet()
		var parsed []*ast.File
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			parsed = append(parsed, af)
		}
		fatal := fatalHelpers(parsed)
		for _, af := range parsed {
			ast.Inspect(af, func(n ast.Node) bool {
				g, ok := n.(*ast.GoStmt)
				if !ok {
					return true
				}
				ast.Inspect(g.Call, func(m ast.Node) bool {
					// A subtest's function runs on its own goroutine,
					// where failing is allowed.
					if c, ok := m.(*ast.CallExpr); ok && calleeName(c) == "Run" && len(c.Args) == 2 {
						if _, lit := c.Args[1].(*ast.FuncLit); lit {
							return false
						}
					}
					if why := failsTest(m, fatal); why != "" {
						bad = append(bad, fset.Position(m.Pos()).String()+": "+why+" in a goroutine")
					}
					return true
				})
				return true
			})
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// testFiles are the repository's test files under root, by directory (a
// directory's test files are one package and its external test package,
// whose helpers share names rarely enough to be read as one).
func testFiles(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			out[filepath.Dir(p)] = append(out[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("found test files in only %d directories under %s: not the repository", len(out), root)
	}
	return out
}

// isT says whether e names a test's *testing.T or B by the names this
// repository gives them (t, tb, b, or a field t of a helper's struct).
func isT(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "t" || x.Name == "tb" || x.Name == "b"
	case *ast.SelectorExpr:
		return x.Sel.Name == "t" || x.Sel.Name == "tb"
	}
	return false
}

// calleeName is the name of the function or method a call calls.
func calleeName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// failsTest says how node n fails the test from where it runs, or "": a
// call of t's Fatal, FailNow or Skip, or t passed to a helper in fatal.
func failsTest(n ast.Node, fatal map[string]bool) string {
	c, ok := n.(*ast.CallExpr)
	if !ok {
		return ""
	}
	if s, ok := c.Fun.(*ast.SelectorExpr); ok && isT(s.X) {
		switch name := s.Sel.Name; {
		case strings.HasPrefix(name, "Fatal"), name == "FailNow", strings.HasPrefix(name, "Skip"):
			return "t." + name
		}
	}
	for _, a := range c.Args {
		if isT(a) && fatal[calleeName(c)] {
			return "t passed to " + calleeName(c) + ", which can fail the test"
		}
	}
	return ""
}

// fatalHelpers are the names of the package's functions and methods that
// fail the test outside a goroutine of their own, directly or through
// another such helper (to a fixpoint).
func fatalHelpers(files []*ast.File) map[string]bool {
	var decls []*ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				decls = append(decls, fd)
			}
		}
	}
	fatal := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, fd := range decls {
			if fatal[fd.Name.Name] {
				continue
			}
			found := false
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if _, ok := n.(*ast.GoStmt); ok || found {
					return false // a goroutine's own calls are the go statement's check
				}
				if failsTest(n, fatal) != "" {
					found = true
				}
				return !found
			})
			if found {
				fatal[fd.Name.Name], changed = true, true
			}
		}
	}
	return fatal
}
