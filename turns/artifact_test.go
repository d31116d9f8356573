package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/turns"
)

// artifactEvent is an artifact event as stored in reckon_events.
type artifactEvent struct {
	Type       string
	TenantID   string
	SessionKey string
	TurnID     uuid.UUID
	Payload    map[string]any
}

func (h *harness) artifactEvents(session string) []artifactEvent {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT type, tenant_id, session_key, turn_id, payload FROM reckon_events
		WHERE session_key = $1 AND type LIKE 'artifact.%' ORDER BY xid, seq`, session)
	require.NoError(h.t, err)
	defer rows.Close()
	var out []artifactEvent
	for rows.Next() {
		var e artifactEvent
		var payload []byte
		require.NoError(h.t, rows.Scan(&e.Type, &e.TenantID, &e.SessionKey, &e.TurnID, &payload))
		require.NoError(h.t, json.Unmarshal(payload, &e.Payload))
		out = append(out, e)
	}
	require.NoError(h.t, rows.Err())
	return out
}

// A turn computes an artifact, saves it and is superseded; the superseding turn of the same group
// gets the stored artifact instead of computing it again when its fingerprints allow: the same
// input, and for CONDITIONAL the same dependency versions; never for NEVER. The lookup reports
// artifact.reused or artifact.invalidated (with why) as an event of the looking turn, and counts.
func TestArtifactReuseAcrossSupersede(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		policy       turns.ReusePolicy
		inputChanges bool
		depsChange   bool
		reason       string // "" when reused
	}{
		{name: "always safe", policy: turns.ReuseAlwaysSafe},
		{name: "always safe, dependencies changed", policy: turns.ReuseAlwaysSafe, depsChange: true},
		{name: "conditional", policy: turns.ReuseConditional},
		{name: "conditional, dependencies changed", policy: turns.ReuseConditional, depsChange: true, reason: "dependencies_changed"},
		{name: "conditional, input changed", policy: turns.ReuseConditional, inputChanges: true, reason: "input_changed"},
		{name: "never", policy: turns.ReuseNever, reason: "never"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var computations atomic.Int32
			input := "order-9"
			versions := turns.Versions{"catalog": "v41", "refund_policy": "v7"}
			var got json.RawMessage
			// plan is the handler's expensive step: taken from the turn group when it may be, else
			// computed and saved.
			plan := func(ctx context.Context, turn *turns.Turn) error {
				data, ok, err := turn.Artifact(ctx, "plan", input, versions.Fingerprint())
				if err != nil {
					return err
				}
				if !ok {
					computations.Add(1)
					data = json.RawMessage(`{"computed_by":"` + turn.ID.String() + `"}`)
					if err := turn.SaveArtifact(ctx, turns.Artifact{
						Name: "plan", Data: data, InputFingerprint: input, DependencyFingerprint: versions.Fingerprint(), Policy: tc.policy,
					}); err != nil {
						return err
					}
				}
				got = data
				return nil
			}
			p := newPausing()
			p.before = plan
			p.after = func(ctx context.Context, turn *turns.Turn) error {
				if tc.depsChange {
					versions = turns.Versions{"catalog": "v42", "refund_policy": "v7"}
				}
				if tc.inputChanges {
					input = "order-10"
				}
				_, err := turn.BeforeIrreversible(ctx)
				return err
			}
			p.later = func(ctx context.Context, turn *turns.Turn) error {
				if err := plan(ctx, turn); err != nil {
					return err
				}
				return turn.Enqueue(refundSpec(turn, 0, 100))
			}
			h := setup(t, turns.Config{Handler: p})
			session := newSession("web")

			first := runSupersededTurn(t, h, p, session)
			require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE turn_group = $1 AND turn_id = $2`, first.Turn.Group, first.Turn.ID),
				"saved at once: the superseded turn committed nothing else")

			second, err := h.tc.RunTurn(ctx, session)
			require.NoError(t, err)
			require.Equal(t, turns.StatusComplete, second.Turn.Status)
			require.Equal(t, first.Turn.Group, second.Turn.Group)

			events := h.artifactEvents(session)
			require.Len(t, events, 1, "one lookup reported; the save after it does not report again")
			e := events[0]
			require.Equal(t, second.Turn.ID, e.TurnID)
			require.Equal(t, session, e.SessionKey)
			require.Equal(t, "acme", e.TenantID)
			require.Equal(t, "plan", e.Payload["name"])
			require.Equal(t, string(tc.policy), e.Payload["policy"])
			require.Equal(t, first.Turn.ID.String(), e.Payload["saved_by"])
			require.Equal(t, first.Turn.Group.String(), e.Payload["turn_group"])
			require.Equal(t, 1.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "miss"}))

			if tc.reason == "" {
				require.Equal(t, int32(1), computations.Load(), "the superseding turn reused the artifact")
				require.JSONEq(t, `{"computed_by":"`+first.Turn.ID.String()+`"}`, string(got))
				require.Equal(t, "artifact.reused", e.Type)
				require.NotContains(t, e.Payload, "reason")
				require.Equal(t, 1.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "reused"}))
				require.Equal(t, 0.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "invalidated"}))
				require.Equal(t, 1.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "saved"}))
				return
			}
			require.Equal(t, int32(2), computations.Load(), "computed again")
			require.JSONEq(t, `{"computed_by":"`+second.Turn.ID.String()+`"}`, string(got))
			require.Equal(t, "artifact.invalidated", e.Type)
			require.Equal(t, tc.reason, e.Payload["reason"])
			require.Equal(t, 0.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "reused"}))
			require.Equal(t, 1.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "invalidated"}))
			require.Equal(t, 2.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "saved"}))
			require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE turn_group = $1 AND turn_id = $2`, second.Turn.Group, second.Turn.ID),
				"the new artifact replaced the old")
		})
	}
}

// Saving over an artifact of an earlier turn without looking it up first reports the stored one
// invalidated when the new fingerprints would not have reused it; a save that would have, does not.
// Turn.Artifacts lists the group's artifacts with the turn that saved each.
func TestArtifactSaveReportsWhatItReplaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var turnNo atomic.Int32
	handler := turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		switch turnNo.Add(1) {
		case 1:
			for _, name := range []string{"summary", "quote"} {
				if err := turn.SaveArtifact(ctx, turns.Artifact{Name: name, Data: json.RawMessage(`1`), InputFingerprint: "in-1", Policy: turns.ReuseAlwaysSafe}); err != nil {
					return err
				}
			}
			return errors.New("the first attempt fails after saving") // a retry: same turn group
		default:
			stored, err := turn.Artifacts(ctx)
			if err != nil {
				return err
			}
			if len(stored) != 2 || stored[0].Name != "quote" || stored[1].Name != "summary" || stored[0].TurnID == turn.ID ||
				stored[0].Policy != turns.ReuseAlwaysSafe || string(stored[0].Data) != "1" || stored[0].SavedAt.IsZero() {
				return errors.New("unexpected stored artifacts")
			}
			if err := turn.SaveArtifact(ctx, turns.Artifact{Name: "summary", Data: json.RawMessage(`2`), InputFingerprint: "in-2"}); err != nil {
				return err
			}
			return turn.SaveArtifact(ctx, turns.Artifact{Name: "quote", Data: json.RawMessage(`2`), InputFingerprint: "in-1"})
		}
	})
	h := setup(t, turns.Config{Handler: handler})
	session := newSession("web")
	h.submit(session, "m1")
	_, err := h.tc.RunTurn(ctx, session)
	require.ErrorContains(t, err, "the first attempt fails")
	retry, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, 2, retry.Turn.Attempt)

	events := h.artifactEvents(session)
	require.Len(t, events, 1)
	require.Equal(t, "artifact.invalidated", events[0].Type)
	require.Equal(t, "summary", events[0].Payload["name"])
	require.Equal(t, "input_changed", events[0].Payload["reason"])
	require.Equal(t, retry.Turn.ID, events[0].TurnID)
	require.Equal(t, 1.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "invalidated"}))
	require.Equal(t, 4.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "saved"}))
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE turn_id = $1 AND data = '2' AND policy = 'CONDITIONAL'`, retry.Turn.ID),
		"both replaced; the default policy is CONDITIONAL")
}

// An artifact Postgres could not store, or out of bounds, is refused before anything is written,
// naming the field; the table's constraints hold the same bounds.
func TestArtifactValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ok := turns.Artifact{Name: "plan", Data: json.RawMessage(`{"a":1}`), InputFingerprint: "in", Policy: turns.ReuseNever}
	require.NoError(t, ok.Validate())
	with := func(change func(a *turns.Artifact)) turns.Artifact {
		a := ok
		change(&a)
		return a
	}
	cases := []struct {
		artifact turns.Artifact
		want     string
	}{
		{with(func(a *turns.Artifact) { a.Name = "" }), "name is required"},
		{with(func(a *turns.Artifact) { a.Name = strings.Repeat("n", turns.MaxArtifactNameBytes+1) }), "name is 201 bytes, at most 200"},
		{with(func(a *turns.Artifact) { a.Name = "a\x00b" }), "name: contains a NUL"},
		{with(func(a *turns.Artifact) { a.Name = "a\xffb" }), "name: not valid UTF-8"},
		{with(func(a *turns.Artifact) { a.Data = nil }), "data is required"},
		{with(func(a *turns.Artifact) { a.Data = json.RawMessage(`{"a":`) }), "data is not valid JSON"},
		{with(func(a *turns.Artifact) { a.Data = json.RawMessage(`{"a":"\u0000"}`) }), `data: a: `},
		{with(func(a *turns.Artifact) {
			a.Data = json.RawMessage(`"` + strings.Repeat("x", turns.MaxArtifactDataBytes) + `"`)
		}), "data is 1048578 bytes, at most 1048576"},
		{with(func(a *turns.Artifact) { a.InputFingerprint = "" }), "input_fingerprint is required"},
		{with(func(a *turns.Artifact) { a.InputFingerprint = strings.Repeat("f", 513) }), "input_fingerprint is 513 bytes, at most 512"},
		{with(func(a *turns.Artifact) { a.DependencyFingerprint = strings.Repeat("f", 513) }), "dependency_fingerprint is 513 bytes"},
		{with(func(a *turns.Artifact) { a.DependencyFingerprint = "\x00" }), "dependency_fingerprint: contains a NUL"},
		{with(func(a *turns.Artifact) { a.Policy = "SOMETIMES" }), `policy "SOMETIMES": want ALWAYS_SAFE, CONDITIONAL or NEVER`},
	}
	var saveErrs []error
	handler := turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		for _, c := range cases {
			saveErrs = append(saveErrs, turn.SaveArtifact(ctx, c.artifact))
		}
		return nil
	})
	h := setup(t, turns.Config{Handler: handler})
	session := newSession("web")
	h.submit(session, "m1")
	_, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	for i, c := range cases {
		require.ErrorContains(t, c.artifact.Validate(), c.want)
		require.ErrorContains(t, saveErrs[i], c.want)
	}
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_turn_artifacts`))
	require.Equal(t, 0.0, h.metric("reckon_turn_artifacts_total", map[string]string{"result": "saved"}))

	for _, insert := range []string{
		`INSERT INTO reckon_turn_artifacts VALUES (gen_random_uuid(), repeat('n', 201), '{}', 'in', '', 'NEVER', gen_random_uuid(), 't', 's')`,
		`INSERT INTO reckon_turn_artifacts VALUES (gen_random_uuid(), 'n', '{}', repeat('f', 513), '', 'NEVER', gen_random_uuid(), 't', 's')`,
		`INSERT INTO reckon_turn_artifacts VALUES (gen_random_uuid(), 'n', '{}', '', '', 'NEVER', gen_random_uuid(), 't', 's')`,
		`INSERT INTO reckon_turn_artifacts VALUES (gen_random_uuid(), 'n', to_jsonb(repeat('x', 1048576)), 'in', '', 'NEVER', gen_random_uuid(), 't', 's')`,
		`INSERT INTO reckon_turn_artifacts VALUES (gen_random_uuid(), 'n', '{}', 'in', '', 'SOMETIMES', gen_random_uuid(), 't', 's')`,
	} {
		_, err := h.pool.Exec(ctx, insert)
		require.ErrorContains(t, err, "violates check constraint", insert)
	}
}

// A dependency fingerprint is stable: the order of the versions does not count, any change does,
// and names and versions cannot run into each other.
func TestVersionsFingerprint(t *testing.T) {
	t.Parallel()
	base := turns.Versions{"catalog": "v41", "refund_policy": "v7"}.Fingerprint()
	require.True(t, strings.HasPrefix(base, "sha256:"))
	require.Len(t, base, len("sha256:")+64)
	require.Equal(t, base, turns.Versions{"refund_policy": "v7", "catalog": "v41"}.Fingerprint())
	for _, other := range []turns.Versions{
		{"catalog": "v42", "refund_policy": "v7"},
		{"catalog": "v41"},
		{"catalog": "v41", "refund_policy": "v7", "prices": "p1"},
		{"catalog": "v41", "refund_policy": "v7 "},
	} {
		require.NotEqual(t, base, other.Fingerprint(), other)
	}
	require.NotEqual(t, turns.Versions{"ab": "c"}.Fingerprint(), turns.Versions{"a": "bc"}.Fingerprint())
	require.Equal(t, turns.Versions{}.Fingerprint(), turns.Versions(nil).Fingerprint())
}
