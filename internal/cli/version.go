package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/version"
)

// versionOptions are version's flags.
type versionOptions struct{ json bool }

func newVersionCmd(env *Env) *cobra.Command {
	var o versionOptions
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print the lowlat version",
		Args:  noArgs,
		RunE:  runWith(env, &o, runVersion),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runVersion(ctx context.Context, env *Env, o *versionOptions, args []string) error {
	v := struct {
		Version string `json:"version"`
		Go      string `json:"go"`
		OS      string `json:"os"`
		Arch    string `json:"arch"`
	}{version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH}
	if o.json {
		return report.JSON(env.Stdout, v)
	}
	_, err := fmt.Fprintf(env.Stdout, "lowlat %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
	return err
}
