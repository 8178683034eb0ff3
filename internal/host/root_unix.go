//go:build unix

package host

import "syscall"

const oNoFollow = syscall.O_NOFOLLOW
