package host_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/test/hostgen"
)

// BenchmarkGatherLive reads this host as doctor does: files, rtnetlink and
// ethtool (OpenRoot("")), and files alone.
func BenchmarkGatherLive(b *testing.B) {
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			src, err := host.OpenRoot("")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := host.Gather(context.Background(), src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("files", func(b *testing.B) {
		for b.Loop() {
			if _, err := host.Gather(context.Background(), host.Source{Live: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGatherFixture reads each committed tree from disk, as --root does.
func BenchmarkGatherFixture(b *testing.B) {
	for _, name := range fixtureNames(b) {
		b.Run(name, func(b *testing.B) {
			src, err := host.OpenRoot(filepath.Join("testdata", "hosts", name))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := host.Gather(context.Background(), src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGatherSynthetic256 reads the 256-CPU host: from memory, and from a
// tree on disk (the capture a user would send).
func BenchmarkGatherSynthetic256(b *testing.B) {
	spec := hostgen.Synthetic256()
	b.Run("mem", func(b *testing.B) {
		src, err := spec.Source()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := host.Gather(context.Background(), src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("disk", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "tree")
		if err := spec.WriteTree(dir); err != nil {
			b.Fatal(err)
		}
		src, err := host.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := host.Gather(context.Background(), src); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSynthetic256Facts is the setup cost a plan benchmark pays once.
func BenchmarkSynthetic256Facts(b *testing.B) {
	for b.Loop() {
		if _, err := hostgen.Synthetic256().Facts(); err != nil {
			b.Fatal(err)
		}
	}
}
