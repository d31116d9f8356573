-- name: DefinitionChangeInsert :exec
-- Records a change of a shared definition or a turn handler, in the change's transaction.
INSERT INTO reckon_definition_changes (kind, name, action, actor, token_id, definition)
VALUES (@kind, @name, @action, @actor, @token_id, @definition);
