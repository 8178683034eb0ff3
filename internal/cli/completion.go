package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// completionShells are the shells 'lowlat completion' writes scripts for.
var completionShells = []string{"bash", "zsh", "fish"}

func newCompletionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "print a shell completion script (e.g. 'lowlat completion bash > /etc/bash_completion.d/lowlat')",
		Long: `Print a script that completes lowlat's commands and flags in the shell.

  bash: lowlat completion bash > /etc/bash_completion.d/lowlat
  zsh:  lowlat completion zsh > "${fpath[1]}/_lowlat"
  fish: lowlat completion fish > ~/.config/fish/completions/lowlat.fish`,
		Args:      exactArgs(1, "shell: bash, zsh or fish"),
		ValidArgs: completionShells,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompletion(cmd.Context(), cmd.Root(), args)
		},
	}
	return cmd
}

// runCompletion writes root's completion script for the shell args[0] to
// root's output (the Env's stdout).
func runCompletion(_ context.Context, root *cobra.Command, args []string) error {
	w := root.OutOrStdout()
	var err error
	switch args[0] {
	case "bash":
		err = root.GenBashCompletionV2(w, true)
	case "zsh":
		err = root.GenZshCompletion(w)
	case "fish":
		err = root.GenFishCompletion(w, true)
	default:
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("completion: unknown shell %q: want bash, zsh or fish (see 'lowlat completion --help')", args[0])}
	}
	if err != nil {
		return fmt.Errorf("completion %s: %w", args[0], err)
	}
	return nil
}
