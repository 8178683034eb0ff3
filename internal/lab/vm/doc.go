// Package vm runs commands in a throwaway qemu virtual machine that boots a
// stock Debian kernel, so that lowlat's tests of qdiscs this host's kernel
// lacks (netem, fq_codel, fq, cake, prio, sfq, codel…) run for real.
//
// Run fetches the kernel once (apt-get download linux-image-6.1.0-N-amd64,
// extracted with dpkg-deb into DefaultCacheDir), builds an initramfs in Go (a
// newc cpio holding busybox-static, the needed modules in dependency order,
// the caller's files and optionally host programs with their shared
// libraries), boots it under qemu-system-x86_64 with TCG (no KVM needed) and
// no network, runs one command with a clean environment and a deadline, and
// returns its exit code, its console output and the files it wrote under
// /out, which travel back base64-encoded over the serial console.
//
// The guest console protocol: /init prints markers of the form
// "@@LOWLAT-<KIND> <nonce> …" around the command; the random per-run nonce
// keeps guest output from forging them. See docs/vm.md.
package vm
