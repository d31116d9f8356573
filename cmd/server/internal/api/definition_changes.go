package api

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// What reckon_definition_changes records (docs/audit.md): a change of a shared definition or of a
// tenant's turn handler, made over the API or with the server's CLI, with who made it.
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

// recordChange records in tx, the transaction of the change, that the call's token made it: action
// on the kind named name, and what is stored now (the API's answer; nil for a delete).
func recordChange(ctx context.Context, tx pgx.Tx, call *Call, kind, name, action string, stored any) error {
	tokenID := call.Token.ID
	return insertChange(ctx, tx, change{kind: kind, name: name, action: action, actor: call.Actor(""), tokenID: &tokenID}, stored)
}

// RecordChange records in tx, the transaction of a change made outside the API (the server's CLI,
// with no token), that actor made it: action on the kind named name, and what is stored now (nil
// for a delete).
func RecordChange(ctx context.Context, tx pgx.Tx, kind, name, action, actor string, stored any) error {
	return insertChange(ctx, tx, change{kind: kind, name: name, action: action, actor: actor}, stored)
}

// change is a row of reckon_definition_changes but what is stored.
type change struct {
	kind, name, action, actor string
	tokenID                   *uuid.UUID
}

func insertChange(ctx context.Context, tx pgx.Tx, c change, stored any) error {
	kind, name := c.kind, c.name
	var definition []byte
	if stored != nil {
		var err error
		if definition, err = marshal(stored); err != nil {
			return fmt.Errorf("record %s %q change: encode: %w", kind, name, err)
		}
	}
	if err := dbsqlc.New(tx).DefinitionChangeInsert(ctx, dbsqlc.DefinitionChangeInsertParams{
		Kind: kind, Name: name, Action: c.action, Actor: c.actor, TokenID: c.tokenID, Definition: definition,
	}); err != nil {
		return fmt.Errorf("record %s %q change: %w", kind, name, err)
	}
	return nil
}
