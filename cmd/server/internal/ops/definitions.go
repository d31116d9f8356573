package ops

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// Changes of what every tenant shares (HTTP connectors, saga definitions) and of a tenant's turn
// handler, made over the HTTP API or with the server's CLI. Each runs in the caller's transaction
// and records there, in reckon_definition_changes (docs/audit.md), who made it and what is stored
// now.

// What reckon_definition_changes records: the kind of what changed, and the action.
const (
	ChangeConnector      = "connector"
	ChangeSagaDefinition = "saga_definition"
	ChangeTurnHandler    = "turn_handler"

	ChangeCreate  = "create"
	ChangeReplace = "replace"
	ChangeDelete  = "delete"
)

// CreateOrReplace is the action of a put that created (or else replaced) what it stored.
func CreateOrReplace(created bool) string {
	if created {
		return ChangeCreate
	}
	return ChangeReplace
}

// Changer is who makes a change: Actor as the audit trail names them, and TokenID, the API token
// the change was made with (nil for the server's CLI, which has none).
type Changer struct {
	Actor   string
	TokenID *uuid.UUID
}

// PutConnector stores def in tx (httpconn.Put: inserted, or replacing the connector of its name)
// and records the change by who. It returns what is stored and whether it was created. Errors:
// httpconn.Put's (httpconn.ErrInvalid for a definition that breaks the rules); nothing is recorded
// then.
func PutConnector(ctx context.Context, tx pgx.Tx, def httpconn.Definition, who Changer) (httpconn.Definition, bool, error) {
	stored, created, err := httpconn.Put(ctx, tx, def)
	if err != nil {
		return stored, created, err
	}
	return stored, created, RecordChange(ctx, tx, ChangeConnector, stored.Name, CreateOrReplace(created), who, stored)
}

// DeleteConnector deletes the HTTP connector name in tx (httpconn.Delete) and records the change
// by who. Errors: httpconn.ErrNotFound, httpconn.ErrInUse (it has PENDING or UNKNOWN effects);
// nothing changes then.
func DeleteConnector(ctx context.Context, tx pgx.Tx, name string, who Changer) error {
	if err := httpconn.Delete(ctx, tx, name); err != nil {
		return err
	}
	return RecordChange(ctx, tx, ChangeConnector, name, ChangeDelete, who, nil)
}

// PutSagaDefinition stores def in tx (sagadef.Put, its connectors checked against registry unless
// it is nil) and, when it is new, records the change by who: storing the same definition again
// changes nothing. It returns what is stored and whether it was created. Errors: sagadef.Put's
// (sagadef.ErrInvalid, sagadef.ErrExists for another definition of that name).
func PutSagaDefinition(ctx context.Context, tx pgx.Tx, def sagadef.Definition, registry *effects.Registry, who Changer) (sagadef.Definition, bool, error) {
	stored, created, err := sagadef.Put(ctx, tx, def, registry)
	if err != nil || !created {
		return stored, created, err
	}
	return stored, created, RecordChange(ctx, tx, ChangeSagaDefinition, stored.Name, ChangeCreate, who, stored)
}

// RecordChange records in tx, the transaction of a change, that who made it: action on the kind
// named name, and what is stored now (as JSON; nil for a delete).
func RecordChange(ctx context.Context, tx pgx.Tx, kind, name, action string, who Changer, stored any) error {
	var definition []byte
	if stored != nil {
		var err error
		if definition, err = json.Marshal(stored); err != nil {
			return fmt.Errorf("record %s %q change: encode: %w", kind, name, err)
		}
	}
	if err := dbsqlc.New(tx).DefinitionChangeInsert(ctx, dbsqlc.DefinitionChangeInsertParams{
		Kind: kind, Name: name, Action: action, Actor: who.Actor, TokenID: who.TokenID, Definition: definition,
	}); err != nil {
		return fmt.Errorf("record %s %q change: %w", kind, name, err)
	}
	return nil
}
