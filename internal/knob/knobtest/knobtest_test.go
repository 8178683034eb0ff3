package knobtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProductionLinksNoFakes: the lowlat binary links none of the test
// scaffolding packages, and package knob declares no fake of its own.
func TestProductionLinksNoFakes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/lowlat/lowlat/cmd/lowlat").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel, ours := strings.CutPrefix(pkg, "github.com/lowlat/lowlat/")
		if ours && (strings.HasSuffix(rel, "test") || strings.HasPrefix(rel, "test/") || strings.Contains(rel, "testnet") || strings.HasSuffix(rel, "hostgen")) {
			t.Errorf("cmd/lowlat links the test package %s", pkg)
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			ast.Inspect(d, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.IsExported() && strings.Contains(id.Name, "Fake") {
					t.Errorf("%s: package knob declares or uses %s", fset.Position(id.Pos()), id.Name)
				}
				return true
			})
		}
	}
}
