package effects_test

import (
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/fakejobs"
)

// childReactorEnv, when set, makes the test binary run as a reactor process instead of running
// tests — the way a Go service runs the reactor in its own process. Crash tests start such
// processes and kill them. The child reads DATABASE_URL and BANK_URL, registers the bank
// connector with checkpoints, and runs until SIGTERM. CHILD_CALL_TIMEOUT, CHILD_IN_FLIGHT_MARGIN
// and CHILD_FETCH_PAUSE (durations) adjust it for a test's scenario; CHILD_REACTOR_ID names it and
// CHILD_RIVER_FETCH=default gives it River's own fetch timings.
const childReactorEnv = "RECKON_TEST_CHILD_REACTOR"

func runChildReactor() int {
	return testkit.RunReactor(func(pool *pgxpool.Pool, logger *slog.Logger) (*effects.Client, error) {
		registry := effects.NewRegistry()
		callTimeout := testkit.EnvDuration("CHILD_CALL_TIMEOUT", time.Second)
		registry.MustRegister(fakebank.ConnectorOptions{
			BaseURL: os.Getenv("BANK_URL"), StatusCheck: true, Compensate: true, Checkpoints: true,
			Timeout: callTimeout, Backoff: testkit.FastBackoff,
		}.Connector())
		registry.MustRegister(holdingAsyncConnector(os.Getenv("BANK_URL"), callTimeout))
		registerLimitedChild(registry)                       // limit_test.go
		if jobsURL := os.Getenv("JOBS_URL"); jobsURL != "" { // async tests: the fake jobs upstream
			registry.MustRegister(fakejobs.ConnectorOptions{
				BaseURL: jobsURL, CallbackURL: os.Getenv("CALLBACK_URL"), Timeout: time.Second, Backoff: testkit.FastBackoff,
				StatusCheckLimit: 1000,
			}.Connector())
		}
		config := testkit.FastConfig(registry)
		config.Logger = logger
		// Takeover tests set a margin such that only the takeover may finish the work soon.
		config.InFlightMargin = testkit.EnvDuration("CHILD_IN_FLIGHT_MARGIN", time.Second)
		if id := os.Getenv("CHILD_REACTOR_ID"); id != "" {
			config.ID = id // a test that kills River's leader finds it by its id
		}
		if os.Getenv("CHILD_RIVER_FETCH") == "default" {
			// River's own fetch timings (poll 1 s, cooldown 100 ms), as a reactor runs in
			// production: what a held-back effect must not depend on.
			config.FetchCooldown, config.FetchPollInterval = 0, 0
		}
		if pause := testkit.EnvDuration("CHILD_FETCH_PAUSE", 0); pause > 0 {
			// Claim tests: after its first fetch River fetches again only after pause, so that a
			// claimed job stays available.
			config.FetchCooldown, config.FetchPollInterval = pause, pause
		}
		return effects.NewClient(pool, config)
	})
}
