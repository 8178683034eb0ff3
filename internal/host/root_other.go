//go:build !unix

package host

import (
	"io"
	"os"
)

// oNoFollow is unavailable here; trees are only read on Unix in practice.
const oNoFollow = 0

func readFileFlags(name string, flags int) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
