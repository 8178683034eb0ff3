//go:build !unix

package host

// oNoFollow is unavailable here; trees are only read on Unix in practice.
const oNoFollow = 0
