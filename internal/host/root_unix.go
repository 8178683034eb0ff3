//go:build unix

package host

import (
	"io/fs"
	"syscall"
)

const oNoFollow = syscall.O_NOFOLLOW

// readFileFlags reads a whole file with plain system calls. os.Open would also
// try to register the descriptor with the poller and query its flags, doubling
// the calls per file; the sysctl walk reads a thousand small files.
func readFileFlags(name string, flags int) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC|flags, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer syscall.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}
