// Command gen writes lowlat's Grafana dashboard (internal/dashboard) to the
// file its argument names; 'go generate ./internal/dashboard' runs it.
package main

import (
	"fmt"
	"os"

	"github.com/lowlat/lowlat/internal/dashboard"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen FILE")
		os.Exit(2)
	}
	b, err := dashboard.JSON()
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
