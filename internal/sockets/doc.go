// Package sockets audits the TCP sockets of a Linux host without attaching a
// tracer to anything: which process owns each socket, the options the
// application set on it, and what the connection is doing right now.
//
// Three kernel interfaces are joined by socket inode:
//
//   - a NETLINK_SOCK_DIAG (inet_diag) dump of every TCP socket of the current
//     network namespace, IPv4 and IPv6, all states, with tcp_info,
//     congestion control, TOS and socket memory. It needs no privilege and
//     works on every kernel lowlat supports; tcp_info is decoded by the
//     length the kernel sent, so fields a kernel does not have are absent,
//     never zero.
//   - /proc/PID/fd, whose socket:[INODE] links name the owning processes.
//   - pidfd_open + pidfd_getfd (Linux 5.6), which duplicate the owner's socket
//     into this process so getsockopt reads the options the application set
//     (TCP_NODELAY, TCP_CORK, buffers, TCP_FASTOPEN...). The duplicate is
//     closed at once. It needs ptrace permission over the owner (root or
//     CAP_SYS_PTRACE, Yama permitting); without it, or on older kernels, the
//     socket's options are "unknown (reason)" and everything else is still
//     reported.
//
// The rest of the package is pure: Summarize condenses an audit into per
// process facts (host.Facts carries them, so doctor runs on captures), and
// the proxy parsers read nginx and HAProxy configuration files so their
// stream/TCP listeners can be compared with the live sockets.
package sockets
