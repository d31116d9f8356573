package httpturn_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/turns"
	"github.com/reckonhq/reckon/turns/httpturn"
)

// The endpoint saves artifacts with its answer; they are stored at once, so a turn superseded at
// its irreversible effect keeps them, and the superseding turn's request carries them with their
// fingerprints and policy. The endpoint reuses one (artifact.reused), computes the NEVER one again
// (saving over it reports it invalidated) and saves a new one.
func TestArtifactsOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEndpoint(t)
	release := make(chan struct{})
	var computations atomic.Int32
	e.set(func(w http.ResponseWriter, req httpturn.Request) {
		effect := `"effects":[{"connector":"bank.refund","args":{"amount":5},"decision":0,"call_index":0}]`
		if len(req.Messages) == 1 {
			computations.Add(2)
			reply(200, `{`+effect+`, "artifacts":[
				{"name":"plan","data":{"steps":["refund"]},"input_fingerprint":"order-9","dependency_fingerprint":"catalog-v41","policy":"CONDITIONAL"},
				{"name":"draft","data":"Dear customer","input_fingerprint":"order-9","policy":"NEVER"}]}`)(w, req)
			<-release // m2 arrives before the turn's irreversible effect: superseded
			return
		}
		computations.Add(2) // draft (NEVER) and notes; plan is reused
		reply(200, `{`+effect+`, "reused":["plan"], "artifacts":[
			{"name":"draft","data":"Dear customer, again","input_fingerprint":"order-9","policy":"NEVER"},
			{"name":"notes","data":{"n":1},"input_fingerprint":"order-9"}]}`)(w, req)
	})
	h := setup(t, e.srv.URL, 10*time.Second)
	session := newSession()
	h.submit(session, "m1", nil)

	first := h.runTurn(session)
	req := <-e.arrived
	require.Empty(t, req.Artifacts)
	require.NotNil(t, req.Artifacts, "sent as [] when the group has none")
	h.submit(session, "m2", nil)
	close(release)
	got := <-first
	require.NoError(t, got.err)
	require.Equal(t, turns.StatusSuperseded, got.result.Turn.Status)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE turn_id = $1`, got.result.Turn.ID),
		"saved though the turn was superseded")

	second, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, second.Turn.Status)
	require.Equal(t, int32(4), computations.Load())
	req = <-e.arrived
	require.Len(t, req.Messages, 2)
	require.Len(t, req.Artifacts, 2)
	draft, plan := req.Artifacts[0], req.Artifacts[1]
	require.Equal(t, "draft", draft.Name)
	require.Equal(t, "NEVER", draft.Policy)
	require.JSONEq(t, `"Dear customer"`, string(draft.Data))
	require.Equal(t, "plan", plan.Name)
	require.Equal(t, "CONDITIONAL", plan.Policy)
	require.Equal(t, "order-9", plan.InputFingerprint)
	require.Equal(t, "catalog-v41", plan.DependencyFingerprint)
	require.JSONEq(t, `{"steps":["refund"]}`, string(plan.Data))
	require.Equal(t, got.result.Turn.ID, plan.TurnID)
	require.False(t, plan.SavedAt.IsZero())

	type event struct {
		kind, name, reason string
		turnID             uuid.UUID
	}
	rows, err := h.pool.Query(ctx, `SELECT type, payload->>'name', coalesce(payload->>'reason', ''), turn_id FROM reckon_events
		WHERE session_key = $1 AND type LIKE 'artifact.%' ORDER BY xid, seq`, session)
	require.NoError(t, err)
	var events []event
	for rows.Next() {
		var ev event
		require.NoError(t, rows.Scan(&ev.kind, &ev.name, &ev.reason, &ev.turnID))
		events = append(events, ev)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []event{
		{"artifact.reused", "plan", "", second.Turn.ID},
		{"artifact.invalidated", "draft", "never", second.Turn.ID},
	}, events)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE name = 'plan' AND turn_id = $1`, got.result.Turn.ID), "plan kept")
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE turn_id = $1`, second.Turn.ID), "draft replaced, notes new")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE name = 'notes' AND policy = 'CONDITIONAL'`))
}

// An answer whose artifacts or reused names are wrong fails the turn for good, naming the field,
// and writes no artifact and no event. The turn group holds a NEVER artifact "draft" and a
// CONDITIONAL one "plan" beforehand.
func TestBadArtifactAnswers(t *testing.T) {
	t.Parallel()
	tooMany := `{"artifacts":[` + strings.Repeat(`{"name":"a","data":1,"input_fingerprint":"f"},`, httpturn.MaxArtifacts) +
		`{"name":"b","data":1,"input_fingerprint":"f"}]}`
	for _, tc := range []struct {
		name, answer, reason string
	}{
		{"name too long", `{"artifacts":[{"name":"` + strings.Repeat("n", 201) + `","data":1,"input_fingerprint":"f"}]}`, "artifacts[0]: turns: artifact: name is 201 bytes, at most 200"},
		{"NUL in name", `{"artifacts":[{"name":"a\u0000","data":1,"input_fingerprint":"f"}]}`, "artifacts[0].name: a string contains \\u0000 (NUL)"},
		{"NUL in data", `{"artifacts":[{"name":"a","data":{"x":"\u0000"},"input_fingerprint":"f"}]}`, "artifacts[0].data.x: a string contains \\u0000 (NUL)"},
		{"no data", `{"artifacts":[{"name":"a","input_fingerprint":"f"}]}`, `artifacts[0]: turns: artifact "a": data is required`},
		{"no input fingerprint", `{"artifacts":[{"name":"a","data":1}]}`, `artifacts[0]: turns: artifact "a": input_fingerprint is required`},
		{"fingerprint too long", `{"artifacts":[{"name":"a","data":1,"input_fingerprint":"f","dependency_fingerprint":"` + strings.Repeat("d", 513) + `"}]}`, "dependency_fingerprint is 513 bytes, at most 512"},
		{"bad policy", `{"artifacts":[{"name":"a","data":1,"input_fingerprint":"f","policy":"always"}]}`, `artifacts[0]: turns: artifact "a": policy "always": want ALWAYS_SAFE, CONDITIONAL or NEVER`},
		{"unknown field", `{"artifacts":[{"name":"a","data":1,"input_fingerprint":"f","ttl":5}]}`, "invalid body"},
		{"twice", `{"artifacts":[{"name":"a","data":1,"input_fingerprint":"f"},{"name":"a","data":2,"input_fingerprint":"f"}]}`, `artifacts[1]: name "a" is answered twice`},
		{"too many", tooMany, "artifacts: 101 answered, at most 100"},
		{"reused unknown", `{"reused":["ghost"]}`, `reused[0]: "ghost" is not an artifact of the turn group`},
		{"reused NEVER", `{"reused":["plan","draft"]}`, `reused[1]: artifact "draft" has policy NEVER`},
		{"reused and saved", `{"reused":["plan"],"artifacts":[{"name":"plan","data":1,"input_fingerprint":"f"}]}`, `reused[0]: artifact "plan" is also saved by the answer`},
		{"reused twice", `{"reused":["plan","plan"]}`, `reused[1]: "plan" is named twice`},
		{"reused not a string", `{"reused":[1]}`, "invalid body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEndpoint(t)
			e.set(reply(200, tc.answer))
			h := setup(t, e.srv.URL, 10*time.Second)
			session := newSession()
			h.submit(session, "m1", nil)
			_, err := h.pool.Exec(ctx, `INSERT INTO reckon_turn_artifacts
				(turn_group, name, data, input_fingerprint, policy, turn_id, tenant_id, session_key)
				SELECT turn_group, n, '1', 'f', p, gen_random_uuid(), 'acme', session_key
				FROM reckon_turns, (VALUES ('draft', 'NEVER'), ('plan', 'CONDITIONAL')) v(n, p) WHERE session_key = $1`, session)
			require.NoError(t, err)

			result, err := h.tc.RunTurn(ctx, session)
			require.ErrorIs(t, err, turns.ErrTurnFailed)
			require.ErrorContains(t, err, tc.reason)
			require.Equal(t, turns.StatusFailed, result.Turn.Status)
			require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_turn_artifacts`), "nothing saved")
			require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_events WHERE type LIKE 'artifact.%'`))
			require.Len(t, (<-e.arrived).Artifacts, 2)
		})
	}
}

// The JSON of a stored artifact in a request is the answer's artifact with turn_id and saved_at.
func TestStoredArtifactJSON(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0193a3c4-0000-7000-8000-000000000001")
	raw, err := json.Marshal(httpturn.StoredArtifact{
		Artifact: httpturn.Artifact{Name: "plan", Data: json.RawMessage(`{"a":1}`), InputFingerprint: "in", Policy: "ALWAYS_SAFE"},
		TurnID:   id, SavedAt: time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"plan","data":{"a":1},"input_fingerprint":"in","policy":"ALWAYS_SAFE",
		"turn_id":"0193a3c4-0000-7000-8000-000000000001","saved_at":"2026-11-22T03:00:00Z"}`, string(raw))
}
