package turns

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/txn"
)

// Bounds of an artifact, checked by Artifact.Validate before anything is written (and again by
// the table's constraints, migration 0029).
const (
	// MaxArtifactNameBytes bounds Artifact.Name.
	MaxArtifactNameBytes = 200
	// MaxArtifactDataBytes bounds Artifact.Data (its JSON text).
	MaxArtifactDataBytes = 1 << 20
	// MaxFingerprintBytes bounds Artifact.InputFingerprint and Artifact.DependencyFingerprint.
	MaxFingerprintBytes = 512
)

// ReusePolicy says when a later turn of the group may take a stored artifact instead of computing
// it again.
type ReusePolicy string

const (
	// ReuseAlwaysSafe: reused whenever the input fingerprint is the same; the dependencies do not
	// matter (the artifact depends only on its input).
	ReuseAlwaysSafe ReusePolicy = "ALWAYS_SAFE"
	// ReuseConditional: reused when the input fingerprint and the dependency fingerprint are both
	// the same (the artifact also depends on versions of things outside the turn: a catalog, a
	// price list, a policy document).
	ReuseConditional ReusePolicy = "CONDITIONAL"
	// ReuseNever: never reused. The artifact is stored (a handler over HTTP sees it) but every
	// lookup reports it invalidated.
	ReuseNever ReusePolicy = "NEVER"
)

// Why a stored artifact is not reused: the reason of an artifact.invalidated event.
const (
	invalidatedInput        = "input_changed"
	invalidatedDependencies = "dependencies_changed"
	invalidatedNever        = "never"
)

// Artifact is something a turn handler computed that a later turn of the same turn group may
// reuse: after a supersede (the superseding turn processes the same messages and more) or a retry.
type Artifact struct {
	// Name identifies the artifact in its turn group: saving a name again replaces it. Required,
	// at most MaxArtifactNameBytes bytes of UTF-8 without NUL.
	Name string
	// Data is the artifact, one JSON value of at most MaxArtifactDataBytes bytes that Postgres can
	// store as jsonb. Required.
	Data json.RawMessage
	// InputFingerprint identifies what the artifact was computed from (e.g. a digest of the
	// messages or prompt it used): a lookup reuses it only for the same fingerprint. Required, at
	// most MaxFingerprintBytes bytes of UTF-8 without NUL.
	InputFingerprint string
	// DependencyFingerprint identifies the versions of what else the artifact depends on, usually
	// Versions.Fingerprint of a snapshot the application takes. A CONDITIONAL artifact is reused
	// only for the same one. Optional (default ""), at most MaxFingerprintBytes bytes.
	DependencyFingerprint string
	// Policy is the reuse policy. Default ReuseConditional.
	Policy ReusePolicy

	// TurnID is the turn that saved it and SavedAt when: set on stored artifacts (Turn.Artifacts),
	// ignored by Turn.SaveArtifact.
	TurnID  uuid.UUID
	SavedAt time.Time
}

// Validate reports what is wrong with an artifact to save, naming the field (by its column and
// HTTP name: name, data, input_fingerprint, dependency_fingerprint, policy). An empty Policy is
// valid (ReuseConditional).
func (a Artifact) Validate() error {
	if a.Name == "" {
		return fmt.Errorf("turns: artifact: name is required")
	}
	if len(a.Name) > MaxArtifactNameBytes {
		return fmt.Errorf("turns: artifact: name is %d bytes, at most %d", len(a.Name), MaxArtifactNameBytes)
	}
	if err := jsonx.CheckText(a.Name); err != nil {
		return fmt.Errorf("turns: artifact: name: %w", err)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("turns: artifact %q: %s", a.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case len(a.Data) == 0:
		return fail("data is required")
	case len(a.Data) > MaxArtifactDataBytes:
		return fail("data is %d bytes, at most %d", len(a.Data), MaxArtifactDataBytes)
	case !json.Valid(a.Data):
		return fail("data is not valid JSON")
	}
	if err := jsonx.Check(a.Data); err != nil {
		return fail("data: %v", err)
	}
	for _, f := range []struct {
		field, value string
		required     bool
	}{
		{"input_fingerprint", a.InputFingerprint, true},
		{"dependency_fingerprint", a.DependencyFingerprint, false},
	} {
		if f.required && f.value == "" {
			return fail("%s is required", f.field)
		}
		if len(f.value) > MaxFingerprintBytes {
			return fail("%s is %d bytes, at most %d", f.field, len(f.value), MaxFingerprintBytes)
		}
		if err := jsonx.CheckText(f.value); err != nil {
			return fail("%s: %v", f.field, err)
		}
	}
	switch a.Policy {
	case "", ReuseAlwaysSafe, ReuseConditional, ReuseNever:
		return nil
	}
	if err := jsonx.CheckText(string(a.Policy)); err != nil {
		return fail("policy: %v", err)
	}
	return fail("policy %q: want ALWAYS_SAFE, CONDITIONAL or NEVER", string(a.Policy))
}

// invalidation says why a stored artifact is not reused for these fingerprints: "" when it is.
func invalidation(stored Artifact, inputFingerprint, dependencyFingerprint string) string {
	switch {
	case stored.Policy == ReuseNever:
		return invalidatedNever
	case stored.InputFingerprint != inputFingerprint:
		return invalidatedInput
	case stored.Policy == ReuseConditional && stored.DependencyFingerprint != dependencyFingerprint:
		return invalidatedDependencies
	}
	return ""
}

// Versions is a snapshot of the versions an artifact depends on, which the application provides:
// name → version, e.g. {"catalog": "2026-11-20T10:00Z", "refund_policy": "v7"}.
type Versions map[string]string

// Fingerprint is a stable digest of the snapshot, for Artifact.DependencyFingerprint and lookups:
// "sha256:" and 64 hex digits. The order of the map does not count; any change of a name or a
// version changes it. A nil or empty snapshot has a fingerprint too (the same for both).
func (v Versions) Fingerprint() string {
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names)
	h := sha256.New()
	var size [8]byte
	write := func(s string) { // length-prefixed, so that {"ab": "c"} and {"a": "bc"} differ
		binary.BigEndian.PutUint64(size[:], uint64(len(s)))
		h.Write(size[:])
		h.Write([]byte(s))
	}
	for _, name := range names {
		write(name)
		write(v[name])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func artifactFromRow(row dbsqlc.ReckonTurnArtifact) Artifact {
	return Artifact{
		Name: row.Name, Data: row.Data, InputFingerprint: row.InputFingerprint, DependencyFingerprint: row.DependencyFingerprint,
		Policy: ReusePolicy(row.Policy), TurnID: row.TurnID, SavedAt: row.SavedAt,
	}
}

// Artifact looks up the turn group's artifact name for a computation with these fingerprints
// and returns its data when it may be reused: the same input fingerprint and, for a CONDITIONAL
// artifact, the same dependency fingerprint (Versions.Fingerprint); a NEVER artifact is never
// returned. ok is false when the group has no such artifact (counted as a miss) or it may not be
// reused: compute it, and save it with SaveArtifact.
//
// A reuse writes the event artifact.reused, a stored artifact that may not be reused
// artifact.invalidated with the reason (input_changed, dependencies_changed, never), both of the
// turn, in the transaction of the lookup; reckon_turn_artifacts_total counts reused,
// invalidated and miss. On an error nothing is written: compute the artifact.
func (t *Turn) Artifact(ctx context.Context, name, inputFingerprint, dependencyFingerprint string) (data json.RawMessage, ok bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, false, ErrTurnEnded
	}
	result, reason := "miss", ""
	var stored Artifact
	err = txn.Once(ctx, t.lock.Conn(), func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		row, err := q.TurnArtifactGet(ctx, dbsqlc.TurnArtifactGetParams{TurnGroup: t.Group, Name: name})
		if postgres.NoRows(err) {
			return nil
		} else if err != nil {
			return err
		}
		stored = artifactFromRow(row)
		reason = invalidation(stored, inputFingerprint, dependencyFingerprint)
		event := "artifact.reused"
		result = "reused"
		if reason != "" {
			event, result = "artifact.invalidated", "invalidated"
		}
		return t.emitArtifactTx(ctx, tx, event, stored, reason)
	})
	if err != nil {
		return nil, false, fmt.Errorf("turns: artifact %q of turn %s: %w", name, t.ID, err)
	}
	t.client.metrics.artifacts.WithLabelValues(result).Inc()
	if result == "miss" {
		return nil, false, nil
	}
	t.artifactLogger().DebugContext(ctx, "artifact "+result, slog.String("artifact", name), slog.String("reason", reason))
	if reason != "" {
		if t.reportedInvalid == nil {
			t.reportedInvalid = map[string]bool{}
		}
		t.reportedInvalid[name] = true
	}
	return stored.Data, reason == "", nil
}

// SaveArtifact stores an artifact for the turn group at once, in a transaction of its own — not
// with the turn's commit — so that it outlives the turn: a turn superseded after saving it never
// commits, and the superseding turn (same group) finds it. Save before BeforeIrreversible: a
// superseded turn's methods return ErrSuperseded or ErrTurnEnded. It replaces a stored artifact
// of the same name; one saved by an earlier turn whose fingerprints this save does not match, and
// that no lookup of this turn reported yet, is reported as artifact.invalidated with the reason. An invalid artifact
// (Validate) saves nothing; counted in reckon_turn_artifacts_total{result="saved"}.
func (t *Turn) SaveArtifact(ctx context.Context, artifact Artifact) error {
	if err := artifact.Validate(); err != nil {
		return err
	}
	if artifact.Policy == "" {
		artifact.Policy = ReuseConditional
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return ErrTurnEnded
	}
	reported := false
	err := txn.Once(ctx, t.lock.Conn(), func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		row, err := q.TurnArtifactGet(ctx, dbsqlc.TurnArtifactGetParams{TurnGroup: t.Group, Name: artifact.Name})
		switch {
		case postgres.NoRows(err):
		case err != nil:
			return err
		case !t.reportedInvalid[artifact.Name] && row.TurnID != t.ID:
			stored := artifactFromRow(row)
			if reason := invalidation(stored, artifact.InputFingerprint, artifact.DependencyFingerprint); reason != "" {
				if err := t.emitArtifactTx(ctx, tx, "artifact.invalidated", stored, reason); err != nil {
					return err
				}
				reported = true
			}
		}
		return q.TurnArtifactUpsert(ctx, dbsqlc.TurnArtifactUpsertParams{
			TurnGroup: t.Group, Name: artifact.Name, Data: artifact.Data, InputFingerprint: artifact.InputFingerprint,
			DependencyFingerprint: artifact.DependencyFingerprint, Policy: string(artifact.Policy), TurnID: t.ID,
			TenantID: t.Tenant, SessionKey: t.SessionKey,
		})
	})
	if err != nil {
		return fmt.Errorf("turns: save artifact %q of turn %s: %w", artifact.Name, t.ID, err)
	}
	if reported {
		t.client.metrics.artifacts.WithLabelValues("invalidated").Inc()
	}
	t.client.metrics.artifacts.WithLabelValues("saved").Inc()
	t.artifactLogger().DebugContext(ctx, "artifact saved", slog.String("artifact", artifact.Name), slog.String("policy", string(artifact.Policy)))
	return nil
}

// Artifacts returns the turn group's stored artifacts by name, whatever their policy, without
// judging or reporting their reuse (Artifact does that), e.g. to hand them to a handler elsewhere.
func (t *Turn) Artifacts(ctx context.Context) ([]Artifact, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, ErrTurnEnded
	}
	rows, err := dbsqlc.New(t.lock.Conn()).TurnArtifactListByGroup(ctx, t.Group)
	if err != nil {
		return nil, fmt.Errorf("turns: artifacts of turn group %s: %w", t.Group, err)
	}
	artifacts := make([]Artifact, len(rows))
	for i, row := range rows {
		artifacts[i] = artifactFromRow(row)
	}
	return artifacts, nil
}

// emitArtifactTx writes an artifact event of the turn about a stored artifact.
func (t *Turn) emitArtifactTx(ctx context.Context, tx pgx.Tx, event string, stored Artifact, reason string) error {
	body := map[string]any{
		"name": stored.Name, "turn_group": t.Group, "policy": stored.Policy, "saved_by": stored.TurnID, "saved_at": stored.SavedAt,
	}
	if reason != "" {
		body["reason"] = reason
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return dbsqlc.New(tx).TurnArtifactEmit(ctx, dbsqlc.TurnArtifactEmitParams{
		Type: event, TenantID: t.Tenant, SessionKey: t.SessionKey, TurnID: t.ID, Payload: payload,
	})
}

func (t *Turn) artifactLogger() *slog.Logger {
	return t.client.logger.With(slog.String("turn_id", t.ID.String()), slog.String("session_key", t.SessionKey))
}
