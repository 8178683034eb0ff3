package passive

// The BPF object is compiled from bpf/passive.c by clang and committed
// (passive_bpfel.o with its Go loader), so that go build needs no clang and
// the binary stays static. make generate reruns this; CI checks the
// committed files are what it produces.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type slot_key -type slot -type hist -type egress_dev -type slot_cache passive bpf/passive.c -- -Ibpf
