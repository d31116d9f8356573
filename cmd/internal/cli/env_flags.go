package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

// EnvFlags registers flags whose defaults come from environment variables. A variable whose value
// cannot be parsed does not become a default: it is collected, and Err names each, so that a
// binary refuses to start (exit status 2) rather than run on a default the operator did not choose.
type EnvFlags struct {
	FlagSet  *flag.FlagSet
	problems []error
}

// IntVar defines an int flag name whose default is env's value, else def.
func (e *EnvFlags) IntVar(p *int, name, env string, def int, usage string) {
	e.FlagSet.IntVar(p, name, envDefault(e, env, def, strconv.Atoi, "an integer"), usage+" (env "+env+")")
}

// Int64Var is IntVar for an int64.
func (e *EnvFlags) Int64Var(p *int64, name, env string, def int64, usage string) {
	parse := func(raw string) (int64, error) { return strconv.ParseInt(raw, 10, 64) }
	e.FlagSet.Int64Var(p, name, envDefault(e, env, def, parse, "an integer"), usage+" (env "+env+")")
}

// DurationVar defines a duration flag name whose default is env's value, else def.
func (e *EnvFlags) DurationVar(p *time.Duration, name, env string, def time.Duration, usage string) {
	e.FlagSet.DurationVar(p, name, envDefault(e, env, def, time.ParseDuration, "a duration such as 30s or 1m"), usage+" (env "+env+")")
}

// BoolVar defines a bool flag name whose default is env's value (as strconv.ParseBool reads it:
// 1, t, true, 0, f, false …), else def.
func (e *EnvFlags) BoolVar(p *bool, name, env string, def bool, usage string) {
	e.FlagSet.BoolVar(p, name, envDefault(e, env, def, strconv.ParseBool, "true or false"), usage+" (env "+env+")")
}

// StringVar defines a string flag name whose default is env's value, else def.
func (e *EnvFlags) StringVar(p *string, name, env, def, usage string) {
	e.FlagSet.StringVar(p, name, Env(env, def), usage+" (env "+env+")")
}

// Err names every environment variable whose value could not be parsed; nil when there is none.
func (e *EnvFlags) Err() error { return errors.Join(e.problems...) }

// envDefault is env's value parsed, or def when env is unset or empty, or (collected as a
// problem) not want.
func envDefault[T any](e *EnvFlags, env string, def T, parse func(string) (T, error), want string) T {
	raw := os.Getenv(env)
	if raw == "" {
		return def
	}
	v, err := parse(raw)
	if err != nil {
		e.problems = append(e.problems, fmt.Errorf("%s=%q: not %s", env, raw, want))
		return def
	}
	return v
}
