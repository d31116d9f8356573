package api

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// What reckon_definition_changes records (docs/audit.md): a change of a shared definition or of a
// tenant's turn handler, made over the API, with who made it.
const (
	changeConnector      = "connector"
	changeSagaDefinition = "saga_definition"
	changeTurnHandler    = "turn_handler"

	changeCreate  = "create"
	changeReplace = "replace"
	changeDelete  = "delete"
)

// createOrReplace is the action of a put that created (or else replaced) what it stored.
func createOrReplace(created bool) string {
	if created {
		return changeCreate
	}
	return changeReplace
}

// recordChange records in tx, the transaction of the change, that the call's token made it: action
// on the kind named name, and what is stored now (the API's answer; nil for a delete).
func recordChange(ctx context.Context, tx pgx.Tx, call *Call, kind, name, action string, stored any) error {
	var definition []byte
	if stored != nil {
		var err error
		if definition, err = marshal(stored); err != nil {
			return fmt.Errorf("record %s %q change: encode: %w", kind, name, err)
		}
	}
	tokenID := call.Token.ID
	if err := dbsqlc.New(tx).DefinitionChangeInsert(ctx, dbsqlc.DefinitionChangeInsertParams{
		Kind: kind, Name: name, Action: action, Actor: call.Actor(""), TokenID: &tokenID, Definition: definition,
	}); err != nil {
		return fmt.Errorf("record %s %q change: %w", kind, name, err)
	}
	return nil
}
