package host_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/test/hostgen"
)

var (
	writeCorpus = flag.Bool("write-corpus", false, "rebuild testdata/corpus from the upstream repositories named by -corpus-git")
	corpusGit   = flag.String("corpus-git", "", "OWNER/NAME=GITDIR,... : local clones of the repositories in testdata/corpus/sources.json")
)

// TestWriteCorpus rebuilds the corpus of real trees (testdata/corpus) from
// the upstream test fixtures named in sources.json, at the recorded
// commits: each tree is unpacked whole into a temporary directory, then
// copied with host.CaptureTree, which keeps exactly the files lowlat reads.
// The copy must tell lowlat what the whole tree told it, or the corpus
// would test a different host.
//
//	go test ./internal/host -run TestWriteCorpus -write-corpus \
//	  -corpus-git prometheus/procfs=$HOME/src/procfs,prometheus/node_exporter=$HOME/src/node_exporter
func TestWriteCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -write-corpus -corpus-git ... to rebuild testdata/corpus")
	}
	gitDirs := map[string]string{}
	for _, kv := range strings.Split(*corpusGit, ",") {
		if repo, dir, ok := strings.Cut(kv, "="); ok {
			gitDirs[repo] = dir
		}
	}
	for _, src := range hosttest.CorpusSources(t) {
		t.Run(src.Name, func(t *testing.T) {
			gitDir := gitDirs[src.Repo]
			if gitDir == "" {
				t.Fatalf("no -corpus-git entry for %s", src.Repo)
			}
			full := t.TempDir()
			for _, part := range src.Parts {
				unpackPart(t, gitDir, src.Commit, part, full)
			}
			dst := hosttest.CorpusDir(src.Name)
			if err := os.RemoveAll(dst); err != nil {
				t.Fatal(err)
			}
			if err := host.CaptureTree(host.Root{Dir: full}, dst); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"LICENSE", "NOTICE"} {
				b := gitShow(t, gitDir, src.Commit+":"+f)
				if err := os.WriteFile(filepath.Join(filepath.Dir(dst), src.Name+"."+f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if d := factsDiff(t, gatherTree(t, full), gatherTree(t, dst)); d != "" {
				t.Errorf("the copy tells lowlat something else than the whole tree (-whole +copy):\n%s", d)
			}
		})
	}
}

// factsDiff compares two gathers of the same host, where they came from
// aside.
func factsDiff(t *testing.T, a, b *host.Facts) string {
	t.Helper()
	var ab, bb bytes.Buffer
	a.Source, b.Source = "", ""
	if err := host.Save(&ab, a); err != nil {
		t.Fatal(err)
	}
	if err := host.Save(&bb, b); err != nil {
		t.Fatal(err)
	}
	return lineDiff(ab.String(), bb.String())
}

// unpackPart puts one part of a source (a ttar archive or a directory of
// the repository at commit) into the tree at root.
func unpackPart(t *testing.T, gitDir, commit string, p hosttest.CorpusPart, root string) {
	t.Helper()
	into := filepath.Join(root, filepath.FromSlash(p.To))
	switch {
	case p.TTAR != "":
		tmp := t.TempDir()
		if err := hostgen.ExtractTTAR(bytes.NewReader(gitShow(t, gitDir, commit+":"+p.TTAR)), tmp); err != nil {
			t.Fatalf("%s: %v", p.TTAR, err)
		}
		moveInto(t, filepath.Join(tmp, filepath.FromSlash(p.From)), into)
	case p.Dir != "":
		cmd := exec.Command("git", "-C", gitDir, "archive", "--format=tar", commit, p.Dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git archive %s: %v", p.Dir, err)
		}
		tmp := t.TempDir()
		untar(t, bytes.NewReader(out), tmp)
		moveInto(t, filepath.Join(tmp, filepath.FromSlash(p.Dir)), into)
	default:
		t.Fatalf("part %+v names neither ttar nor dir", p)
	}
}

func moveInto(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func gitShow(t *testing.T, gitDir, obj string) []byte {
	t.Helper()
	out, err := exec.Command("git", "-C", gitDir, "show", obj).Output()
	if err != nil {
		t.Fatalf("git show %s in %s: %v", obj, gitDir, err)
	}
	return out
}

// untar unpacks git archive's output: directories, files and symlinks.
func untar(t *testing.T, r io.Reader, dst string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := path.Clean(h.Name)
		if strings.HasPrefix(name, "..") || path.IsAbs(name) {
			t.Fatalf("archive entry %q leaves the tree", h.Name)
		}
		p := filepath.Join(dst, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, os.FileMode(h.Mode).Perm())
				}
			}
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.Symlink(h.Linkname, p)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCorpusSourcesRecorded: every corpus tree says where it came from, at
// which commit and under which licence, and carries that licence.
func TestCorpusSourcesRecorded(t *testing.T) {
	srcs := hosttest.CorpusSources(t)
	if len(srcs) < 2 {
		t.Fatalf("corpus has %d sources, want at least 2", len(srcs))
	}
	for _, s := range srcs {
		if s.Repo == "" || len(s.Commit) != 40 || s.License == "" || len(s.Parts) == 0 {
			t.Errorf("%s: source incomplete: %+v", s.Name, s)
		}
		for _, f := range []string{s.Name, s.Name + ".LICENSE"} {
			if _, err := os.Stat(filepath.Join(filepath.Dir(hosttest.CorpusDir(s.Name)), f)); err != nil {
				t.Errorf("%s: %v", s.Name, err)
			}
		}
	}
	b, _ := json.Marshal(srcs)
	if !bytes.Contains(b, []byte("Apache-2.0")) {
		t.Errorf("no licence recorded in %s", b)
	}
}
