package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/report"
)

func newProfileCmd(env *Env) *cobra.Command {
	return newGroupCmd("profile <subcommand>",
		"list the built-in profiles or show one (profile list | profile show NAME)",
		"List the built-in profiles or show one, every setting with its rationale.",
		"subcommand",
		newProfileListCmd(env), newProfileShowCmd(env))
}

type profileInfo struct {
	Name    string            `json:"name"`
	Summary string            `json:"summary"`
	Source  string            `json:"source"`
	Params  []profile.Param   `json:"params,omitempty"`
	Chain   []string          `json:"chain,omitempty"`
	Values  map[string]string `json:"param_values,omitempty"`
	// Settings as resolved.
	Settings []settingInfo `json:"settings,omitempty"`
}

type settingInfo struct {
	Key       string   `json:"key"`
	Value     string   `json:"value"`
	Fallbacks []string `json:"fallbacks,omitempty"`
	Why       string   `json:"why"`
	Source    string   `json:"source"`
}

// profileListOptions are profile list's flags.
type profileListOptions struct{ json bool }

func newProfileListCmd(env *Env) *cobra.Command {
	var o profileListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "the built-in profiles, their runbooks and parameters",
		Args:  noArgs,
		RunE:  runWith(env, &o, runProfileList),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runProfileList(ctx context.Context, env *Env, o *profileListOptions, args []string) error {
	var out []profileInfo
	for _, n := range profile.BuiltinNames() {
		p, err := profile.Builtin(n)
		if err != nil {
			return err
		}
		info := profileInfo{Name: p.Name, Summary: p.Summary, Source: p.Source}
		for _, pn := range p.ParamNames() {
			info.Params = append(info.Params, p.Params[pn])
		}
		out = append(out, info)
	}
	if o.json {
		return report.JSON(env.Stdout, map[string]any{"profiles": out})
	}
	t := report.Table{Header: []string{"profile", "runbook", "params", "summary"}}
	for _, p := range out {
		params := ""
		for _, pr := range p.Params {
			if params != "" {
				params += " "
			}
			params += pr.Name
			if pr.Required {
				params += "*"
			}
		}
		t.AddStrings(p.Name, p.Source, params, p.Summary)
	}
	return t.Render(env.Stdout, env.TTY)
}

// profileShowOptions are profile show's flags.
type profileShowOptions struct {
	json bool
	sets setFlag
}

func newProfileShowCmd(env *Env) *cobra.Command {
	o := profileShowOptions{sets: setFlag{}}
	cmd := &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "one profile: its parameters and every setting with its rationale and runbook",
		Args:  exactArgs(1, "profile name or file"),
		RunE:  runWith(env, &o, runProfileShow),
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.Var(o.sets, "set", "set a parameter or override a setting: `key=value` (repeatable)")
	return cmd
}

func runProfileShow(ctx context.Context, env *Env, o *profileShowOptions, args []string) error {
	p, err := profile.Load(args[0])
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("profile show: %w", err)}
	}
	info := profileInfo{Name: p.Name, Summary: p.Summary, Source: p.Source}
	for _, pn := range p.ParamNames() {
		info.Params = append(info.Params, p.Params[pn])
	}
	// Show a profile with required parameters even when they are not given:
	// templates stay visible then.
	r, rerr := profile.Resolve(p, o.sets)
	if rerr == nil {
		info.Chain, info.Values = r.Chain, r.Params
		for _, s := range r.Settings {
			info.Settings = append(info.Settings, settingInfo{Key: s.Key, Value: s.Value, Fallbacks: s.Fallbacks, Why: s.Why, Source: s.Source})
		}
	} else {
		if len(o.sets) > 0 {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("profile show: %w", rerr)}
		}
		for _, s := range p.Settings {
			info.Settings = append(info.Settings, settingInfo{Key: s.Key, Value: s.Value, Fallbacks: s.Fallbacks, Why: s.Why, Source: s.Source})
		}
	}
	if o.json {
		return report.JSON(env.Stdout, info)
	}
	fmt.Fprintf(env.Stdout, "%s — %s (see %s)\n", report.Paint(info.Name, report.Bold, env.TTY), info.Summary, info.Source)
	for _, pr := range info.Params {
		req := ""
		if pr.Required {
			req = ", required"
		}
		fmt.Fprintf(env.Stdout, "  param %s (%s%s): %s\n", pr.Name, pr.Type, req, pr.Doc)
	}
	if rerr != nil {
		fmt.Fprintf(env.Stdout, "  (values shown unresolved: %v)\n", rerr)
	}
	fmt.Fprintln(env.Stdout)
	t := report.Table{Header: []string{"setting", "value", "runbook", "why"}}
	for _, s := range info.Settings {
		t.AddStrings(s.Key, s.Value, s.Source, s.Why)
		for _, f := range s.Fallbacks {
			t.Add(report.C(""), report.S("or: "+f, report.Dim), report.C(""), report.S("if the kernel lacks the above", report.Dim))
		}
	}
	return t.Render(env.Stdout, env.TTY)
}
