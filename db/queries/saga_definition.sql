-- name: SagaDefinitionInsert :one
-- Stores a new saga definition; no row when the name is taken (definitions never change).
INSERT INTO reckon_saga_definitions (name, steps, compensation_attempts)
VALUES (@name, @steps, @compensation_attempts)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: SagaDefinitionGet :one
SELECT * FROM reckon_saga_definitions WHERE name = @name;

-- name: SagaDefinitionList :many
-- Every saga definition, by name.
SELECT * FROM reckon_saga_definitions ORDER BY name;
