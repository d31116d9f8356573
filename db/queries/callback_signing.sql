-- Signed callbacks (0015_callback_signing).

-- name: CallbackKeyGet :one
-- The deployment's callback key, from which every effect's callback secret is derived.
SELECT key FROM reckon_callback_keys WHERE id = 1;

-- name: CallbackSignatureUse :execrows
-- Records a signature as used by the callback running in this transaction: 0 rows when it was used
-- already. A concurrent transaction that recorded the same signature makes this one wait for its
-- outcome: if it commits, the signature is used; if it rolls back, this one records it.
INSERT INTO reckon_callback_signatures (signature, effect_id, expires_at)
VALUES (@signature, @effect_id, @expires_at)
ON CONFLICT (signature) DO NOTHING;

-- name: CallbackSignaturePrune :execrows
-- Deletes up to max_rows signatures expired at now, skipping those another transaction is
-- deleting: each callback prunes a few, so that the table holds about the last five minutes'
-- signatures and no callback waits for another's pruning; retention prunes the rest in batches.
DELETE FROM reckon_callback_signatures
WHERE signature IN (
    SELECT signature FROM reckon_callback_signatures
    WHERE expires_at < @now::timestamptz
    ORDER BY expires_at
    LIMIT @max_rows::integer
    FOR UPDATE SKIP LOCKED
);
