// Package hosttest loads the fixture hosts in internal/host/testdata/hosts and
// the corpus of real trees in internal/host/testdata/corpus for tests of the
// packages that reason about facts (plan, doctor, irq planning).
package hosttest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
)

// Names are the fixture hosts, one per shape the runbooks describe.
var Names = []string{"virtio-vm", "epyc-25g", "dual-i40e-nvme", "centos7-3.10"}

// Dir is the fixture tree of the named host.
func Dir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "hosts", name)
}

// Fixture gathers the named fixture host's facts, failing the test on error.
func Fixture(t testing.TB, name string) *host.Facts {
	t.Helper()
	return gather(t, Dir(name))
}

// gather reads the tree at dir as --root would, failing the test on error.
func gather(t testing.TB, dir string) *host.Facts {
	t.Helper()
	src, err := host.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := host.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// CorpusSource is where one corpus tree came from (testdata/corpus/sources.json):
// a public project's test fixture, a real host's /proc and /sys as that
// project captured them, at a recorded commit and under its licence.
type CorpusSource struct {
	Name    string       `json:"name"`
	Repo    string       `json:"repo"`
	Commit  string       `json:"commit"`
	License string       `json:"license"`
	Parts   []CorpusPart `json:"parts"`
}

// CorpusPart is one piece of a tree: a ttar archive (whose From directory
// becomes To) or a directory of the repository.
type CorpusPart struct {
	TTAR string `json:"ttar,omitempty"`
	Dir  string `json:"dir,omitempty"`
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}

func corpusRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "corpus")
}

// CorpusSources reads sources.json.
func CorpusSources(t testing.TB) []CorpusSource {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusRoot(), "sources.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []CorpusSource
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// CorpusNames are the corpus trees.
func CorpusNames(t testing.TB) []string {
	var out []string
	for _, s := range CorpusSources(t) {
		out = append(out, s.Name)
	}
	return out
}

// CorpusDir is the named corpus tree, to read with --root.
func CorpusDir(name string) string { return filepath.Join(corpusRoot(), name) }

// Corpus gathers the named corpus tree's facts, failing the test on error.
func Corpus(t testing.TB, name string) *host.Facts {
	t.Helper()
	return gather(t, CorpusDir(name))
}

// CorpusOf is Corpus of the named tree as a function of the test, for test
// tables.
func CorpusOf(name string) func(t *testing.T) *host.Facts {
	return func(t *testing.T) *host.Facts { return Corpus(t, name) }
}
