package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// seedAged records n settled effects of connector that look 40 days old (CONFIRMED, with their
// insert and settle in the audit trail), keyed prefix-1…prefix-n, in one transaction.
func seedAged(t *testing.T, pool *pgxpool.Pool, prefix string, n int, state effects.State) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `
		INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, args, transition_actor, transition_reason)
		SELECT gen_random_uuid(), 'acme', 'bank.wire', $1 || g, 'idempotent', '{"amount": 1}', 'seed', 'aged history'
		FROM generate_series(1, $2::int) g`, prefix+"-", n)
	require.NoError(t, err)
	path := []effects.State{effects.StateConfirmed}
	if state == effects.StateStuck {
		path = []effects.State{effects.StateUnknown, effects.StateStuck}
	}
	for _, s := range path {
		_, err = tx.Exec(ctx, `UPDATE reckon_effects SET state = $2, transition_actor = 'seed', transition_reason = 'aged history'
			WHERE idempotency_key LIKE $1 || '%'`, prefix+"-", string(s))
		require.NoError(t, err)
	}
	// Not a transition: the audit trail does not change.
	_, err = tx.Exec(ctx, `UPDATE reckon_effects SET created_at = now() - interval '41 days', updated_at = now() - interval '40 days'
		WHERE idempotency_key LIKE $1 || '%'`, prefix+"-")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

// halfHistories counts the effects whose audit trail does not start with their insert or does not
// end in their state: what no reader may ever see.
func halfHistories(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return testkit.Count(t, pool, `
		SELECT count(*) FROM reckon_effects e
		WHERE NOT EXISTS (SELECT 1 FROM reckon_effect_transitions t WHERE t.effect_id = e.id AND t.from_state IS NULL)
		   OR e.state IS DISTINCT FROM (SELECT t.to_state FROM reckon_effect_transitions t WHERE t.effect_id = e.id ORDER BY t.id DESC LIMIT 1)`)
}

// TestRetentionSurvivesSIGKILL: reactors dispatch wires while a backlog of 40-day-old settled
// effects is pruned in small batches, first by `server retention run`, which is SIGKILLed mid-run,
// then by the reactors' own retention job, whose reactor is SIGKILLed mid-run as well. Nothing is
// lost: every wire enqueued meanwhile is CONFIRMED and performed once, the old STUCK effects and
// the recent ones are untouched, no effect is ever left with half its history, the killed runs stay
// marked unfinished, and retention resumes on the surviving reactor until the backlog is gone.
func TestRetentionSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", 10*time.Second))
	const aged = 20000
	seedAged(t, f.pool, "aged", aged, effects.StateConfirmed)
	seedAged(t, f.pool, "stuck", 50, effects.StateStuck)
	ctx := context.Background()

	// Live traffic for the whole test.
	stop := make(chan struct{})
	enqueued := make(chan *effects.Effect, 10000)
	go func() {
		defer close(enqueued)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			effect, err := f.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: fmt.Sprintf("live-%d", i),
				Args: map[string]any{"account": "acc-1", "amount": i + 1}}, nil)
			if err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			enqueued <- effect
		}
	}()
	retentionFlags := []string{"-effect-retention", "720h", "-retention-batch", "20"}
	first := f.startReactor(append([]string{"-id", "reactor-a", "-retention-interval", "0"}, retentionFlags...)...)

	// The CLI run, killed once it has pruned some.
	cli := exec.Command(proctest.Binary(t, "server"), append([]string{"retention", "run"}, retentionFlags...)...)
	cli.Env = append(os.Environ(), f.env...)
	require.NoError(t, cli.Start())
	require.Eventually(t, func() bool {
		return testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'aged-%'`) < aged-500
	}, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, cli.Process.Signal(syscall.SIGKILL))
	_ = cli.Wait()
	require.Zero(t, halfHistories(t, f.pool))
	afterCLI := testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'aged-%'`)
	require.Positive(t, afterCLI, "killed before it finished")
	require.Equal(t, 1, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_retention_runs WHERE finished_at IS NULL AND actor LIKE 'cli:%'`))

	// The fleet turns its own retention on (every reactor of a deployment runs the same periodic
	// jobs): the reactor running it is killed mid-run, the other finishes.
	first.Stop(t)
	second := f.startReactor(append([]string{"-id", "reactor-b", "-retention-interval", "1s"}, retentionFlags...)...)
	third := f.startReactor(append([]string{"-id", "reactor-c", "-retention-interval", "1s"}, retentionFlags...)...)
	var runner string
	require.Eventually(t, func() bool {
		err := f.pool.QueryRow(ctx, `SELECT actor FROM reckon_retention_runs WHERE finished_at IS NULL AND actor LIKE 'retention:%'`).Scan(&runner)
		return err == nil && testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'aged-%'`) < afterCLI-500
	}, 60*time.Second, 10*time.Millisecond)
	killed, survivor := second, third
	if runner == "retention:reactor-c" {
		killed, survivor = third, second
	}
	killed.Signal(t, syscall.SIGKILL)
	killed.Wait(t, 10*time.Second)
	require.Zero(t, halfHistories(t, f.pool))

	require.Eventually(t, func() bool {
		return testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'aged-%'`) == 0
	}, 120*time.Second, 100*time.Millisecond, "retention resumes on the survivor\n%s", survivor.Stderr())
	close(stop)

	var live []*effects.Effect
	for effect := range enqueued {
		live = append(live, effect)
	}
	require.NotEmpty(t, live)
	for _, effect := range live {
		settled := f.wait(effect)
		require.Equal(t, effects.StateConfirmed, settled.State, effect.IdempotencyKey)
		require.Equal(t, 1, f.bank.Count(effect.IdempotencyKey), "%s performed once", effect.IdempotencyKey)
	}
	require.Equal(t, 50, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'stuck-%' AND state = 'STUCK'`),
		"unsettled effects are never pruned")
	require.Zero(t, halfHistories(t, f.pool))
	require.Equal(t, aged, testkit.Count(t, f.pool, `SELECT count(DISTINCT t.effect_id) FROM reckon_effect_transitions t
		WHERE t.reason = 'aged history' AND t.from_state IS NULL AND NOT EXISTS (SELECT 1 FROM reckon_effects e WHERE e.id = t.effect_id)`),
		"the pruned effects' history stays in the audit trail")
	names := map[*proctest.Process]string{second: "reactor-b", third: "reactor-c"}
	// The survivor runs every second and may be in a run now: only the killed runs are counted.
	require.Equal(t, 2, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_retention_runs WHERE finished_at IS NULL AND (actor LIKE 'cli:%' OR actor = $1)`,
		"retention:"+names[killed]), "the killed runs stay unfinished")
	require.Positive(t, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_retention_runs WHERE finished_at IS NOT NULL AND error IS NULL AND actor = $1`,
		"retention:"+names[survivor]))
	survivor.Stop(t)
}

// TestReactorRunsRetention: the reactor makes the audit partitions ahead when it starts and, with
// -retention-interval, prunes at once (the periodic job runs on start), recorded under its id and
// counted in its metrics; with -retention-interval 0 it has no retention job.
func TestReactorRunsRetention(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `
		INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
		SELECT gen_random_uuid(), 'acme', 'bank.wire', 'old-' || g, 'idempotent', 'test', 'seeded' FROM generate_series(1, 30) g`)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'test', transition_reason = 'settled'`)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_effects SET updated_at = now() - interval '40 days'`)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_audit_settings SET premake = interval '150 days'`)
	require.NoError(t, err, "partitions are due further ahead")

	idle := f.startReactor("-id", "idle", "-retention-interval", "0")
	require.True(t, idle.Logged("audit partitions made ahead"), idle.Stderr())
	require.NotContains(t, scrape(t, idle), "reckon_retention_runs_total", "no retention job")
	idle.Stop(t)
	require.Zero(t, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_retention_runs`))

	p := f.startReactor("-id", "pruner", "-retention-interval", "1h", "-retention-batch", "7")
	require.Eventually(t, func() bool {
		return testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_retention_runs WHERE actor = 'retention:pruner' AND finished_at IS NOT NULL AND error IS NULL`) == 1
	}, 30*time.Second, 20*time.Millisecond, p.Stderr())
	require.Zero(t, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'old-%'`))
	body := scrape(t, p)
	require.Contains(t, body, `reckon_retention_rows_pruned_total{table="reckon_effects"} 30`)
	require.Contains(t, body, `reckon_retention_runs_total{result="ok"} 1`)
	p.Stop(t)
}
