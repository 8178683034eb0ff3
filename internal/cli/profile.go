package cli

import (
	"context"
	"fmt"

	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/report"
)

func init() {
	register(&command{name: "profile", summary: "list the built-in profiles or show one (profile list | profile show NAME)", order: 20, run: runProfile})
}

const profileUsage = "Usage: lowlat profile list [--json]\n       lowlat profile show NAME|FILE [--set key=value]... [--json]\n"

func runProfile(ctx context.Context, env *Env, args []string) error {
	return dispatch(ctx, env, "profile", profileUsage, "subcommand", []sub{
		{"list", withoutCtx(profileList)}, {"show", withoutCtx(profileShow)},
	}, args)
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

func profileList(env *Env, args []string) error {
	fs := flagSet(env, "profile list", "profile list [--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return helpOK(err)
	}
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
	if *asJSON {
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

func profileShow(env *Env, args []string) error {
	fs := flagSet(env, "profile show", "profile show NAME|FILE [--set key=value]... [--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	sets := setFlag{}
	fs.Var(sets, "set", "set a parameter or override a setting: `key=value` (repeatable)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 1, 1, "profile name or file"); err != nil {
		return err
	}
	p, err := profile.Load(pos[0])
	if err != nil {
		return err
	}
	info := profileInfo{Name: p.Name, Summary: p.Summary, Source: p.Source}
	for _, pn := range p.ParamNames() {
		info.Params = append(info.Params, p.Params[pn])
	}
	// Show a profile with required parameters even when they are not given:
	// templates stay visible then.
	r, rerr := profile.Resolve(p, sets)
	if rerr == nil {
		info.Chain, info.Values = r.Chain, r.Params
		for _, s := range r.Settings {
			info.Settings = append(info.Settings, settingInfo{Key: s.Key, Value: s.Value, Fallbacks: s.Fallbacks, Why: s.Why, Source: s.Source})
		}
	} else {
		if len(sets) > 0 {
			return rerr
		}
		for _, s := range p.Settings {
			info.Settings = append(info.Settings, settingInfo{Key: s.Key, Value: s.Value, Fallbacks: s.Fallbacks, Why: s.Why, Source: s.Source})
		}
	}
	if *asJSON {
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
