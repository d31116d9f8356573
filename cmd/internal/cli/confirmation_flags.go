package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/reckonhq/reckon/effects"
)

// ConfirmationFlags are the confirmation-hold settings of the processes that enqueue effects — the
// reactor (turns, sagas) and the server (its API) — each a flag defaulting to an environment
// variable (docs/design.md, "Confirmation holds"; docs/operations.md).
type ConfirmationFlags struct {
	// RequireIrreversible is effects.Config.RequireIrreversibleConfirmation. Default false.
	RequireIrreversible bool
	// TTL is effects.Config.ConfirmationTTL. Default 0: no expiry.
	TTL time.Duration
	// FourEyes is effects.Config.FourEyes. Default false.
	FourEyes bool
}

// Register defines -require-irreversible-confirmation, -confirmation-ttl and -four-eyes on env's
// flag set.
func (f *ConfirmationFlags) Register(env *EnvFlags) {
	env.BoolVar(&f.RequireIrreversible, "require-irreversible-confirmation", "RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION", false,
		"hold every effect of an irreversible connector that this process enqueues until a person confirms it")
	env.DurationVar(&f.TTL, "confirmation-ttl", "RECKON_CONFIRMATION_TTL", 0,
		fmt.Sprintf("how long a held effect awaits its confirmation when its spec does not say, then FAILED \"confirmation expired\"; 0: no expiry, else 1s to %v", effects.MaxConfirmationTTL))
	env.BoolVar(&f.FourEyes, "four-eyes", "RECKON_FOUR_EYES", false,
		"the effects this process holds refuse a confirmation by the actor that enqueued them")
}

// Validate names the flag whose value is out of range.
func (f *ConfirmationFlags) Validate() error {
	if f.TTL < 0 || (f.TTL > 0 && (f.TTL < time.Second || f.TTL > effects.MaxConfirmationTTL)) {
		return fmt.Errorf("-confirmation-ttl must be 0 (no expiry) or between 1s and %v, got %v", effects.MaxConfirmationTTL, f.TTL)
	}
	return nil
}

// Apply sets config's confirmation settings to the flags'.
func (f *ConfirmationFlags) Apply(config *effects.Config) {
	config.RequireIrreversibleConfirmation, config.ConfirmationTTL, config.FourEyes = f.RequireIrreversible, f.TTL, f.FourEyes
}

// LogAttrs describes the settings for a start-up log line.
func (f *ConfirmationFlags) LogAttrs() []any {
	return []any{slog.Bool("require_irreversible_confirmation", f.RequireIrreversible),
		slog.String("confirmation_ttl", f.TTL.String()), slog.Bool("four_eyes", f.FourEyes)}
}
