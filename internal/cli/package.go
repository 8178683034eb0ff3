package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/persist"
	"github.com/lowlat/lowlat/internal/txn"
)

// The commands a distribution package's build and maintainer scripts run
// (deploy/package). They are hidden: users never type them.

// packagedExe is where the packages install the binary.
const packagedExe = "/usr/bin/lowlat"

func newUnitsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "__units DIR",
		Short:  "write the systemd units the packages ship (lowlat-boot.service, lowlat-reassert.service/.timer) into DIR",
		Hidden: true,
		Args:   exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeUnits(args[0])
		},
	}
}

// writeUnits writes persist.Packaged for the packaged binary and the
// default journal: the package and an apply write the same units.
func writeUnits(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("__units: %w", err)
	}
	for name, text := range persist.Packaged(packagedExe, journal.DefaultPath) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("__units: %w", err)
		}
	}
	return nil
}

// InForceMarker is the file the package's prerm leaves when transactions
// are still in force at removal, or when it could not read the journal;
// postrm purge keeps the journal while it exists (the journal is what a
// reinstalled lowlat rolls them back from).
const InForceMarker = "in-force-at-removal"

// ClearMarker is the file prerm leaves when it read the journal and found
// nothing in force: the journal's identity ("inode size mtime", as
// stat -c '%i %s %Y' prints it). postrm purge deletes a journal only when
// this file matches it, so a journal that prerm never read (it failed, or
// did not run), or that changed since, is kept.
const ClearMarker = "clear-at-removal"

// removingOptions are __removing's flags.
type removingOptions struct {
	journal string
}

func newRemovingCmd(env *Env) *cobra.Command {
	var o removingOptions
	cmd := &cobra.Command{
		Use:    "__removing",
		Short:  "run by the package's prerm: say which transactions stay in force and how to roll them back",
		Hidden: true,
		Args:   noArgs,
		RunE:   runWith(env, &o, runRemoving),
	}
	cmd.Flags().StringVar(&o.journal, "journal", "", "journal `file`")
	return cmd
}

// runRemoving never changes the host's tuning and never fails the removal:
// a package manager that cannot remove lowlat because lowlat's journal is
// unreadable would be worse than a removal that leaves a warning. It leaves
// next to the journal what a later purge needs to know, since the binary is
// gone by then: the in-force marker when transactions are in force or the
// journal could not be read (damaged, written by a newer lowlat), the clear
// marker only when it read the journal and nothing is in force.
func runRemoving(ctx context.Context, env *Env, o *removingOptions, args []string) error {
	path := journalPath(env, o.journal)
	dir := filepath.Dir(path)
	marker, clear := filepath.Join(dir, InForceMarker), filepath.Join(dir, ClearMarker)
	// A clear marker from an earlier removal must not outlive this one.
	os.Remove(clear)
	keep := func(lines []string) {
		if err := os.WriteFile(marker, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			fmt.Fprintf(env.Stderr, "lowlat: write %s: %v\n", marker, err)
		}
	}
	rep, err := engine(env, o.journal).Status(ctx, txn.StatusOptions{Peek: true})
	if err != nil {
		fmt.Fprintf(env.Stderr, "lowlat: cannot read the journal %s (%v): the host's tuning is left as it is; keep %s to roll it back later\n", path, err, dir)
		keep([]string{fmt.Sprintf("unknown: the journal could not be read: %v", err)})
		return nil
	}
	if len(rep.Active) == 0 {
		os.Remove(marker)
		if id, err := fileIdentity(path); err == nil {
			if err := os.WriteFile(clear, []byte(id+"\n"), 0o600); err != nil {
				fmt.Fprintf(env.Stderr, "lowlat: write %s: %v\n", clear, err)
			}
		}
		return nil
	}
	var ids []string
	for _, a := range rep.Active {
		ids = append(ids, a.ID)
	}
	sort.Strings(ids)
	fmt.Fprint(env.Stderr, removingNotice(path, ids))
	keep(ids)
	return nil
}

// fileIdentity is "inode size mtime" of path, as stat -c '%i %s %Y' prints
// it: a journal is append-only, so any write since changes it.
func fileIdentity(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("%s: no inode number", path)
	}
	return fmt.Sprintf("%d %d %d", st.Ino, fi.Size(), fi.ModTime().Unix()), nil
}

// removingNotice tells the operator what stays and how to undo it.
func removingNotice(journalFile string, ids []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lowlat: %d transaction(s) stay in force after this removal: %s\n", len(ids), strings.Join(ids, ", "))
	b.WriteString("lowlat: removing the package does not change the host's tuning. To undo it, reinstall lowlat and run\n")
	b.WriteString("lowlat:     lowlat rollback --all\n")
	fmt.Fprintf(&b, "lowlat: The journal %s is kept, also on purge, until they are rolled back.\n", journalFile)
	b.WriteString("lowlat: Units an apply wrote to /etc/systemd/system (lowlat-boot.service, lowlat-reassert.timer) run a binary that is now gone: they fail until lowlat is reinstalled or rolled back.\n")
	return b.String()
}
