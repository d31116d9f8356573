package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// runEffectsCLI runs `server effects ARGS` in this process against pool's database.
func runEffectsCLI(t *testing.T, pool *pgxpool.Pool, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"effects"}, args...)
	args = append(args, "-database-url", pool.Config().ConnString())
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// seedEffect writes an effect of tenant in state through legal transitions (actor "test") and
// returns its id.
func seedEffect(t *testing.T, pool *pgxpool.Pool, tenant, connector, key, state string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	_, err := pool.Exec(ctx, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
		VALUES ($1, $2, $3, $4, 'idempotent', 'test', 'seeded')`, id, tenant, connector, key)
	require.NoError(t, err)
	path := map[string][]string{"PENDING": nil, "CONFIRMED": {"CONFIRMED"}, "FAILED": {"FAILED"}, "STUCK": {"UNKNOWN", "STUCK"}}[state]
	for _, to := range path {
		_, err := pool.Exec(ctx, `UPDATE reckon_effects SET state = $2, transition_actor = 'test', transition_reason = 'moved',
			transition_detail = '{"upstream": "timeout"}' WHERE id = $1`, id, to)
		require.NoError(t, err)
	}
	return id
}

func effectState(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) string {
	t.Helper()
	var state string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT state FROM reckon_effects WHERE id = $1`, id).Scan(&state))
	return state
}

// TestEffectsCLI: list in a table and as JSON with filters and pages, show the evidence, resolve
// one (recorded as operator:{-actor}), bulk resolve with a dry run that changes nothing, cancel.
func TestEffectsCLI(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	stuck := []uuid.UUID{
		seedEffect(t, pool, "acme", "bank.wire", "wire-1", "STUCK"),
		seedEffect(t, pool, "acme", "bank.wire", "wire-2", "STUCK"),
		seedEffect(t, pool, "globex", "bank.wire", "wire-3", "STUCK"),
	}
	confirmed := seedEffect(t, pool, "acme", "mail.send", "mail-1", "CONFIRMED")

	code, out, errOut := runEffectsCLI(t, pool, "list", "-tenant", "acme")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^ID\s+TENANT\s+CONNECTOR\s+STATE\s+IDEMPOTENCY KEY\s+ATTEMPTS\s+CREATED$`, lines[0])
	require.Contains(t, lines[1], confirmed.String()) // newest first
	require.Contains(t, out, "wire-1")
	require.NotContains(t, out, "wire-3")

	code, out, errOut = runEffectsCLI(t, pool, "list", "-state", "STUCK", "-connector", "bank.wire", "-limit", "2", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var page struct {
		Effects []struct {
			ID       uuid.UUID `json:"id"`
			TenantID string    `json:"tenant_id"`
			State    string    `json:"state"`
		} `json:"effects"`
		Next string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Effects, 2)
	require.Equal(t, stuck[2], page.Effects[0].ID)
	require.NotEmpty(t, page.Next)
	code, out, errOut = runEffectsCLI(t, pool, "list", "-state", "STUCK", "-connector", "bank.wire", "-limit", "2", "-after", page.Next)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, stuck[0].String())
	require.NotContains(t, out, "more: -after")

	code, out, errOut = runEffectsCLI(t, pool, "show", stuck[0].String())
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"EFFECT", stuck[0].String(), "acme", "wire-1", "UNKNOWN", "STUCK", `{"upstream": "timeout"}`, "moved"} {
		require.Contains(t, out, want)
	}
	code, out, errOut = runEffectsCLI(t, pool, "show", stuck[0].String(), "-o", "json")
	require.Equal(t, 0, code, errOut)
	var evidence struct {
		Effect struct {
			State   string                       `json:"state"`
			Tags    []string                     `json:"tags"`
			History []struct{ To, Actor string } `json:"history"`
		} `json:"effect"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &evidence))
	require.Equal(t, "STUCK", evidence.Effect.State)
	require.NotNil(t, evidence.Effect.Tags, "the API's shape: tags always present")
	require.Len(t, evidence.Effect.History, 3)

	// One resolved, recorded as operator:cli:{user} or operator:{-actor}.
	code, out, errOut = runEffectsCLI(t, pool, "resolve", stuck[0].String(), "-to", "CONFIRMED", "-reason", "bank confirmed by phone", "-actor", "ann")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "resolved effect "+stuck[0].String()+" CONFIRMED")
	require.Equal(t, 1, testkit.Count(t, pool, `SELECT count(*) FROM reckon_effect_transitions
		WHERE effect_id = $1 AND actor = 'operator:ann' AND reason = 'bank confirmed by phone' AND to_state = 'CONFIRMED'`, stuck[0]))

	// Bulk: the dry run lists and changes nothing; -yes resolves.
	code, out, errOut = runEffectsCLI(t, pool, "resolve", "-all", "-connector", "bank.wire", "-to", "FAILED", "-reason", "outage", "-dry-run")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "2 effects would be resolved FAILED")
	require.Contains(t, out, stuck[1].String())
	require.Contains(t, out, stuck[2].String())
	require.Equal(t, "STUCK", effectState(t, pool, stuck[1]))
	require.Equal(t, "STUCK", effectState(t, pool, stuck[2]))
	code, _, errOut = runEffectsCLI(t, pool, "resolve", "-all", "-connector", "bank.wire", "-to", "FAILED", "-reason", "outage")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "-yes")
	require.Equal(t, "STUCK", effectState(t, pool, stuck[1]))
	code, out, errOut = runEffectsCLI(t, pool, "resolve", "-all", "-tenant", "globex", "-to", "FAILED", "-reason", "outage", "-yes")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "resolved 1 effects FAILED")
	require.Equal(t, "FAILED", effectState(t, pool, stuck[2]))
	require.Equal(t, "STUCK", effectState(t, pool, stuck[1]))

	code, _, errOut = runEffectsCLI(t, pool, "resolve", confirmed.String(), "-to", "FAILED", "-reason", "x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not STUCK")
	code, _, errOut = runEffectsCLI(t, pool, "show", uuid.NewString())
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")
}

// TestEffectsCLIBadInput: every usage mistake exits 2 naming the flag, and changes nothing.
func TestEffectsCLIBadInput(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	id := seedEffect(t, pool, "acme", "bank.wire", "wire-1", "STUCK").String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-state", "DONE"}, "-state"},
		{[]string{"list", "-tenant", "-bad-"}, "-tenant"},
		{[]string{"list", "-connector", "bank\x00wire"}, "-connector"},
		{[]string{"list", "-idempotency-key", "\xff"}, "-idempotency-key"},
		{[]string{"list", "-business-key", strings.Repeat("k", 600)}, "-business-key"},
		{[]string{"list", "-turn", "no"}, "-turn"},
		{[]string{"list", "-created-after", "yesterday"}, "-created-after"},
		{[]string{"list", "-limit", "0"}, "-limit"},
		{[]string{"list", "-limit", "-5"}, "-limit"},
		{[]string{"list", "-limit", "99999999999999999999"}, "-limit"},
		{[]string{"list", "-after", strings.Repeat("x", 10000)}, "-after"},
		{[]string{"list", "-turn", "\xff"}, "-turn"},
		{[]string{"list", "-created-before", "10000-01-01T00:00:00Z"}, "-created-before"},
		{[]string{"resolve", "-all", "-connector", "\xff", "-to", "FAILED", "-reason", "r", "-dry-run"}, "-connector"},
		{[]string{"list", "-after", "garbage"}, "-after"},
		{[]string{"list", "-o", "yaml"}, "-o"},
		{[]string{"list", "extra"}, "unexpected argument"},
		{[]string{"show"}, "needs an ID"},
		{[]string{"show", "not-a-uuid"}, "not a UUID"},
		{[]string{"resolve", id, "-to", "DONE", "-reason", "r"}, "-to"},
		{[]string{"resolve", id, "-to", "FAILED"}, "-reason"},
		{[]string{"resolve", id, "-to", "FAILED", "-reason", "bad\x00"}, "-reason"},
		{[]string{"resolve", id, "-to", "FAILED", "-reason", strings.Repeat("r", 1001)}, "-reason"},
		{[]string{"resolve", id, "-to", "FAILED", "-reason", "r", "-actor", "\xff"}, "-actor"},
		{[]string{"resolve", id, "-to", "FAILED", "-reason", "r", "-tenant", "acme"}, "-tenant"},
		{[]string{"resolve", "-all", "-state", "PENDING", "-to", "FAILED", "-reason", "r", "-dry-run"}, "-state"},
		{[]string{"cancel", id}, "-reason"},
		{[]string{"purge"}, "unknown effects action"},
	} {
		code, _, errOut := runEffectsCLI(t, pool, tc.args...)
		require.Equal(t, 2, code, "%q: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, fmt.Sprintf("%q", tc.args))
	}
	require.Equal(t, "STUCK", effectState(t, pool, uuid.MustParse(id)))
	require.Equal(t, 0, testkit.Count(t, pool, `SELECT count(*) FROM reckon_effect_transitions WHERE actor LIKE 'operator:%'`))
}

// TestEffectsCLIConfirmation: confirm and decline an effect awaiting its confirmation, recorded as
// operator:{-actor}; the wrong moment exits 1 naming it, and a missing reason is a usage error.
func TestEffectsCLIConfirmation(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	held := func(key string) uuid.UUID {
		id := seedEffect(t, pool, "acme", "bank.wire", key, "PENDING")
		_, err := pool.Exec(context.Background(), `UPDATE reckon_effects SET confirmation = 'AWAITING', confirmation_prompt = 'Wire?', queue = 'reckon' WHERE id = $1`, id)
		require.NoError(t, err)
		return id
	}
	confirmMe, declineMe := held("h-1"), held("h-2")

	// Listed longest waiting first with their prompts; shown with the hold; the list marks them.
	code, stdout, stderr := runEffectsCLI(t, pool, "awaiting")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Equal(t, "2 awaiting confirmation", lines[0])
	require.Len(t, lines, 4, stdout)
	require.Contains(t, lines[2], confirmMe.String())
	require.Contains(t, lines[2], "Wire?")
	require.Contains(t, lines[3], declineMe.String())
	code, stdout, stderr = runEffectsCLI(t, pool, "awaiting", "-limit", "1", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var page struct {
		Effects []struct {
			ID           string `json:"id"`
			Confirmation struct {
				State  string `json:"state"`
				Prompt string `json:"prompt"`
			} `json:"confirmation"`
		} `json:"effects"`
		Total      int    `json:"total"`
		NextCursor string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &page), stdout)
	require.Equal(t, 2, page.Total)
	require.Len(t, page.Effects, 1)
	require.Equal(t, confirmMe.String(), page.Effects[0].ID)
	require.Equal(t, "Wire?", page.Effects[0].Confirmation.Prompt)
	require.NotEmpty(t, page.NextCursor)
	code, stdout, stderr = runEffectsCLI(t, pool, "awaiting", "-after", page.NextCursor)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, declineMe.String())
	require.NotContains(t, stdout, confirmMe.String())
	code, _, stderr = runEffectsCLI(t, pool, "awaiting", "-limit", "0")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "limit")
	code, stdout, stderr = runEffectsCLI(t, pool, "show", confirmMe.String())
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `state\s+PENDING \(awaiting confirmation\)`, stdout)
	require.Regexp(t, `prompt\s+Wire\?`, stdout)
	code, stdout, stderr = runEffectsCLI(t, pool, "list", "-tenant", "acme")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "PENDING (awaiting confirmation)")

	code, _, stderr = runEffectsCLI(t, pool, "confirm", confirmMe.String(), "-actor", "ann")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "-reason")
	code, stdout, stderr = runEffectsCLI(t, pool, "confirm", confirmMe.String(), "-reason", "called back", "-actor", "ann")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "confirmed effect "+confirmMe.String())
	var by, confirmation string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT confirmation, confirmation_by FROM reckon_effects WHERE id = $1`, confirmMe).Scan(&confirmation, &by))
	require.Equal(t, "CONFIRMED", confirmation)
	require.Equal(t, "operator:ann", by)
	code, stdout, stderr = runEffectsCLI(t, pool, "show", confirmMe.String())
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `decided\s+\S+ by operator:ann: called back`, stdout)

	code, stdout, stderr = runEffectsCLI(t, pool, "decline", declineMe.String(), "-reason", "not authorised")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "declined effect "+declineMe.String()+" (FAILED)")
	require.Equal(t, "FAILED", effectState(t, pool, declineMe))

	code, _, stderr = runEffectsCLI(t, pool, "decline", confirmMe.String(), "-reason", "too late")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "does not await a confirmation")
}

// TestEffectsCLIRedrive: redrive one FAILED effect (recorded as operator:{-actor}), and in bulk
// with a dry run that changes nothing, then -yes; the wrong state exits 1 naming it; usage
// mistakes exit 2 naming the flag.
func TestEffectsCLIRedrive(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	one := seedEffect(t, pool, "acme", "bank.wire", "wire-1", "FAILED")
	many := []uuid.UUID{seedEffect(t, pool, "acme", "bank.wire", "wire-2", "FAILED"), seedEffect(t, pool, "globex", "bank.wire", "wire-3", "FAILED")}
	mail := seedEffect(t, pool, "acme", "mail.send", "mail-1", "FAILED")
	confirmed := seedEffect(t, pool, "acme", "bank.wire", "wire-ok", "CONFIRMED")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"redrive", one.String()}, "-reason"},
		{[]string{"redrive", one.String(), "-reason", "bad\x00"}, "-reason"},
		{[]string{"redrive", one.String(), "-reason", "r", "-to", "PENDING"}, "-to"},
		{[]string{"redrive", one.String(), "-reason", "r", "-connector", "bank.wire"}, "-connector"},
		{[]string{"redrive", "-all", "-connector", "bank.wire", "-reason", "r"}, "-yes"},
		{[]string{"redrive", "-all", "-state", "STUCK", "-reason", "r", "-dry-run"}, "-state"},
		{[]string{"redrive", "not-a-uuid", "-reason", "r"}, "not a UUID"},
	} {
		code, _, errOut := runEffectsCLI(t, pool, tc.args...)
		require.Equal(t, 2, code, "%q: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, fmt.Sprintf("%q", tc.args))
	}
	require.Equal(t, 0, testkit.Count(t, pool, `SELECT count(*) FROM reckon_effect_transitions WHERE actor LIKE 'operator:%'`))

	code, out, errOut := runEffectsCLI(t, pool, "redrive", one.String(), "-reason", "outage over", "-actor", "ann")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "redrove effect "+one.String()+" (PENDING)")
	require.Equal(t, 1, testkit.Count(t, pool, `SELECT count(*) FROM reckon_effect_transitions
		WHERE effect_id = $1 AND actor = 'operator:ann' AND reason = 'redrive: outage over' AND from_state = 'FAILED' AND to_state = 'PENDING'`, one))
	require.Equal(t, 1, testkit.Count(t, pool, `SELECT count(*) FROM reckon_effects e JOIN river_job j ON j.id = e.job_id
		WHERE e.id = $1 AND e.attempts = 0 AND j.kind = 'reckon_dispatch' AND j.state = 'available'`, one), "a new dispatch job, a fresh budget")
	code, _, errOut = runEffectsCLI(t, pool, "redrive", confirmed.String(), "-reason", "x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not FAILED")

	code, out, errOut = runEffectsCLI(t, pool, "redrive", "-all", "-connector", "bank.wire", "-reason", "outage over", "-dry-run")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "2 effects would be redriven")
	require.Contains(t, out, many[0].String())
	require.Contains(t, out, many[1].String())
	require.NotContains(t, out, mail.String())
	require.Equal(t, "FAILED", effectState(t, pool, many[0]))
	code, out, errOut = runEffectsCLI(t, pool, "redrive", "-all", "-connector", "bank.wire", "-reason", "outage over", "-yes", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"redriven"`)
	for _, id := range many {
		require.Equal(t, "PENDING", effectState(t, pool, id))
	}
	require.Equal(t, "FAILED", effectState(t, pool, mail))

	// Business-key dedup: a FAILED effect whose business key a newer effect now holds is not
	// redriven, and nothing changes.
	_, err := pool.Exec(context.Background(), `UPDATE reckon_effects SET business_key = 'order-9', business_key_dedup = true WHERE id = ANY($1)`,
		[]uuid.UUID{mail, seedEffect(t, pool, "acme", "mail.send", "mail-2", "PENDING")})
	require.NoError(t, err)
	code, _, errOut = runEffectsCLI(t, pool, "redrive", mail.String(), "-reason", "again")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "business key of the effect is held by another effect")
	require.Equal(t, "FAILED", effectState(t, pool, mail))
}
