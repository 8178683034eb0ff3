package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/lowlat/lowlat/internal/version"
)

func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "write a man page for lowlat and for each of its commands into DIR (for packages)",
		Hidden: true, // packagers and 'make man' run it; users read the pages
		Args:   exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMan(cmd.Context(), cmd.Root(), args)
		},
	}
}

// runMan writes lowlat.1, lowlat-apply.1, lowlat-probe-udp.1 … into
// args[0], generated from the same command tree --help prints, so the pages
// cannot drift from the flags. SOURCE_DATE_EPOCH, when set, dates them
// (reproducible package builds).
func runMan(_ context.Context, root *cobra.Command, args []string) error {
	dir := args[0]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("man: %w", err)
	}
	header := &doc.GenManHeader{Section: "1", Source: "lowlat " + version.String(), Manual: "lowlat manual"}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("man: write pages to %s: %w", dir, err)
	}
	return nil
}
