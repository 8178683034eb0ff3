package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Kernel is a bootable kernel image and the modules built for it.
type Kernel struct {
	// Release is the kernel's uname -r, e.g. "6.1.0-48-amd64"; modules live in
	// /lib/modules/<Release> in the guest.
	Release string
	// Image is the host path of the bzImage (vmlinuz).
	Image string
	// ModulesDir is the host path of the kernel's modules tree
	// (…/lib/modules/<Release>); empty for a kernel without modules.
	ModulesDir string
	// Package names the Debian package it came from ("name version"), if any.
	Package string
}

// LocalKernel describes a kernel the caller provides: image is a bzImage and
// modulesDir its /lib/modules/<release> tree (may be empty when every needed
// feature is built in, and then Config must ask for no modules).
func LocalKernel(image, modulesDir string) (*Kernel, error) {
	if _, err := os.Stat(image); err != nil {
		return nil, fmt.Errorf("kernel image: %w", err)
	}
	k := &Kernel{Image: image}
	if modulesDir != "" {
		st, err := os.Stat(modulesDir)
		if err != nil {
			return nil, fmt.Errorf("kernel modules: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("kernel modules %s: not a directory", modulesDir)
		}
		k.ModulesDir = modulesDir
		k.Release = filepath.Base(filepath.Clean(modulesDir))
	}
	return k, nil
}

// DefaultCacheDir is where fetched kernels are kept: $LOWLAT_VM_CACHE, else
// $XDG_CACHE_HOME/lowlat/vm, else ~/.cache/lowlat/vm.
func DefaultCacheDir() string {
	if d := os.Getenv("LOWLAT_VM_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		if home, err := os.UserHomeDir(); err == nil {
			base = filepath.Join(home, ".cache")
		} else {
			base = os.TempDir()
		}
	}
	return filepath.Join(base, "lowlat", "vm")
}

// FetchOptions tune DebianKernel.
type FetchOptions struct {
	// CacheDir holds extracted kernels; DefaultCacheDir() when empty.
	CacheDir string
	// Package pins the Debian package (e.g. "linux-image-6.1.0-48-amd64").
	// Empty means: the newest linux-image-6.1.0-N-amd64 in the cache, or, when
	// the cache has none (or Refresh is set), the newest apt knows.
	Package string
	// Refresh asks apt for the newest package even when the cache has one.
	Refresh bool
	// Log receives progress lines (download, extraction); nil discards.
	Log io.Writer
}

// debianKernelRE matches the stock Debian 6.1 kernel packages (signed; they
// carry the modules too). Cloud and RT flavours lack drivers or differ in
// scheduling, so they are not picked.
var debianKernelRE = regexp.MustCompile(`^linux-image-6\.1\.0-(\d+)-amd64$`)

const completeStamp = ".lowlat-complete"

// DebianKernel returns a stock Debian kernel with its modules, downloading the
// package with apt-get download and extracting it with dpkg-deb into the cache
// on first use. It runs apt-get update once when apt's lists know no kernel
// package (that needs root). Concurrent callers share the cache safely.
func DebianKernel(ctx context.Context, opts FetchOptions) (*Kernel, error) {
	cache := opts.CacheDir
	if cache == "" {
		cache = DefaultCacheDir()
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	kdir := filepath.Join(cache, "kernels")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return nil, fmt.Errorf("vm cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(cache, ".lock"))
	if err != nil {
		return nil, fmt.Errorf("vm cache: lock: %w", err)
	}
	defer unlock()

	k, err := debianKernel(ctx, kdir, opts, logw)
	if err != nil {
		return nil, err
	}
	// Extract the PVH kernel now, under the lock, so runs never race on it.
	pvhKernel(k, cache, logw)
	return k, nil
}

func debianKernel(ctx context.Context, kdir string, opts FetchOptions, logw io.Writer) (*Kernel, error) {
	pkg := opts.Package
	if pkg == "" && !opts.Refresh {
		if k := newestCachedKernel(kdir); k != nil {
			return k, nil
		}
	}
	if pkg == "" {
		var err error
		if pkg, err = newestAptKernel(ctx, logw); err != nil {
			return nil, err
		}
	}
	if k := cachedKernel(kdir, pkg); k != nil {
		return k, nil
	}
	return fetchKernel(ctx, kdir, pkg, logw)
}

// cachedKernel returns the complete extraction of pkg in the cache, if any.
func cachedKernel(kdir, pkg string) *Kernel {
	dir := filepath.Join(kdir, pkg)
	b, err := os.ReadFile(filepath.Join(dir, completeStamp))
	if err != nil {
		return nil
	}
	k, err := kernelFromTree(dir)
	if err != nil {
		return nil
	}
	k.Package = strings.TrimSpace(string(b))
	return k
}

func newestCachedKernel(kdir string) *Kernel {
	ents, err := os.ReadDir(kdir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if debianKernelRE.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sortKernelPackages(names)
	for i := len(names) - 1; i >= 0; i-- {
		if k := cachedKernel(kdir, names[i]); k != nil {
			return k
		}
	}
	return nil
}

// sortKernelPackages orders linux-image-6.1.0-N-amd64 names by N.
func sortKernelPackages(names []string) {
	abi := func(s string) int {
		m := debianKernelRE.FindStringSubmatch(s)
		if m == nil {
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	sort.SliceStable(names, func(i, j int) bool { return abi(names[i]) < abi(names[j]) })
}

// kernelFromTree finds boot/vmlinuz-R and lib/modules/R (or usr/lib/modules/R)
// in an extracted package.
func kernelFromTree(dir string) (*Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return nil, fmt.Errorf("kernel package %s: want one boot/vmlinuz-*, found %d", dir, len(images))
	}
	release := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	for _, m := range []string{"lib/modules", "usr/lib/modules"} {
		md := filepath.Join(dir, m, release)
		if st, err := os.Stat(md); err == nil && st.IsDir() {
			return &Kernel{Release: release, Image: images[0], ModulesDir: md}, nil
		}
	}
	return nil, fmt.Errorf("kernel package %s: no modules directory for %s", dir, release)
}

func runLogged(ctx context.Context, logw io.Writer, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%s not found (a Debian host with apt is needed to fetch the kernel; or set Config.Kernel): %w", name, err)
		}
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// newestAptKernel asks apt-cache for linux-image-6.1.0-N-amd64 packages and
// returns the highest N, running apt-get update first if the lists know none.
func newestAptKernel(ctx context.Context, logw io.Writer) (string, error) {
	search := func() ([]string, error) {
		out, err := runLogged(ctx, logw, "", "apt-cache", "search", "--names-only", `^linux-image-6\.1\.0-[0-9]+-amd64$`)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, line := range strings.Split(string(out), "\n") {
			name, _, _ := strings.Cut(line, " ")
			if debianKernelRE.MatchString(name) {
				names = append(names, name)
			}
		}
		return names, nil
	}
	names, err := search()
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		fmt.Fprintln(logw, "vm: apt lists know no linux-image-6.1.0-*-amd64; running apt-get update")
		if _, err := runLogged(ctx, logw, "", "apt-get", "update"); err != nil {
			return "", fmt.Errorf("fetch kernel: %w", err)
		}
		if names, err = search(); err != nil {
			return "", err
		}
	}
	if len(names) == 0 {
		return "", errors.New("fetch kernel: apt knows no linux-image-6.1.0-*-amd64 package (needs Debian bookworm's main archive in apt sources); set Config.Kernel to use your own")
	}
	sortKernelPackages(names)
	return names[len(names)-1], nil
}

// fetchKernel downloads and extracts pkg into kdir/pkg.
func fetchKernel(ctx context.Context, kdir, pkg string, logw io.Writer) (*Kernel, error) {
	tmp, err := os.MkdirTemp(kdir, ".fetch-")
	if err != nil {
		return nil, fmt.Errorf("fetch kernel: %w", err)
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(logw, "vm: downloading %s\n", pkg)
	// The sandbox option keeps apt from warning that _apt cannot write to a
	// root-owned cache directory.
	if _, err := runLogged(ctx, logw, tmp, "apt-get", "download", "-o", "APT::Sandbox::User=root", pkg); err != nil {
		return nil, fmt.Errorf("fetch kernel: %w", err)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return nil, fmt.Errorf("fetch kernel: apt-get download %s left %d .deb files", pkg, len(debs))
	}
	version := ""
	if parts := strings.Split(strings.TrimSuffix(filepath.Base(debs[0]), ".deb"), "_"); len(parts) >= 2 {
		version = strings.ReplaceAll(parts[1], "%3a", ":")
	}
	fmt.Fprintf(logw, "vm: extracting %s\n", filepath.Base(debs[0]))
	tree := filepath.Join(tmp, "tree")
	if _, err := runLogged(ctx, logw, tmp, "dpkg-deb", "-x", debs[0], tree); err != nil {
		return nil, fmt.Errorf("fetch kernel: %w", err)
	}
	// Documentation is not needed to boot.
	os.RemoveAll(filepath.Join(tree, "usr", "share"))
	if _, err := kernelFromTree(tree); err != nil {
		return nil, fmt.Errorf("fetch kernel: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tree, completeStamp), []byte(pkg+" "+version+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("fetch kernel: %w", err)
	}
	final := filepath.Join(kdir, pkg)
	// Two runs fetching at once (make vmtest boots two VMs side by side):
	// the one that finishes second uses the first one's tree, and never
	// removes a complete tree the other may be booting from.
	if k := cachedKernel(kdir, pkg); k != nil {
		return k, nil
	}
	if err := os.RemoveAll(final); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("fetch kernel: %w", err)
	}
	if err := os.Rename(tree, final); err != nil {
		if k := cachedKernel(kdir, pkg); k != nil {
			return k, nil
		}
		return nil, fmt.Errorf("fetch kernel: %w", err)
	}
	k := cachedKernel(kdir, pkg)
	if k == nil {
		return nil, fmt.Errorf("fetch kernel: %s: extracted tree is incomplete", final)
	}
	return k, nil
}
