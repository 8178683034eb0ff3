// Command gen256 writes the synthetic 256-CPU, 4-node host with a 64-queue
// mlx5 NIC as a capture file, for benchmarking plan on a big host.
package main

import (
	"fmt"
	"os"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/test/hostgen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen256 OUT.json")
		os.Exit(2)
	}
	f, err := hostgen.Synthetic256().Facts()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen256:", err)
		os.Exit(1)
	}
	out, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen256:", err)
		os.Exit(1)
	}
	if err := host.Save(out, f); err != nil {
		fmt.Fprintln(os.Stderr, "gen256:", err)
		os.Exit(1)
	}
	if err := out.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "gen256:", err)
		os.Exit(1)
	}
	q := 0
	for _, i := range f.Interfaces {
		q = max(q, i.NumTxQueues)
	}
	fmt.Fprintf(os.Stderr, "gen256: %d CPUs, %d NUMA nodes, %d interfaces (max %d tx queues), %d IRQs -> %s\n", len(f.CPUs), len(f.NUMA), len(f.Interfaces), q, len(f.IRQs), os.Args[1])
}
