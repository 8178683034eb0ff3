package cli

import "flag"

// flagSetLike is the subset of *flag.FlagSet helpers register on.
type flagSetLike interface {
	StringVar(p *string, name, value, usage string)
	Var(value flag.Value, name, usage string)
}
