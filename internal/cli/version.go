package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/version"
)

func init() {
	register(&command{name: "version", summary: "print the lowlat version", order: 90, run: runVersion})
}

func runVersion(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "version", "version [--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	v := struct {
		Version string `json:"version"`
		Go      string `json:"go"`
		OS      string `json:"os"`
		Arch    string `json:"arch"`
	}{version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH}
	if *asJSON {
		return report.JSON(env.Stdout, v)
	}
	_, err = fmt.Fprintf(env.Stdout, "lowlat %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
	return err
}

// helpOK turns the --help sentinel into success.
func helpOK(err error) error {
	if err == errHelp {
		return nil
	}
	return err
}
