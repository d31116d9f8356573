package effects

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/postgres"
)

// Signed callbacks (docs/async.md): every effect has a callback secret of its own, given to its
// upstream with the dispatch, with which the upstream signs its callback. The secret is derived
// from the deployment's callback key (reckon_callback_keys, made by the migration) and the effect's
// id, so it is never stored: whoever holds the key can derive it again, and nobody else can.

// callbackSecretLabel keeps the secrets apart from anything else a future version derives from the
// same key.
const callbackSecretLabel = "reckon callback secret v1\x00"

// callbackKey is the deployment's callback key, read from the database on first use and kept: it
// never changes while the process runs.
type callbackKey struct {
	mu  sync.Mutex
	key []byte
}

// CallbackSecret returns the callback secret of the effect with this id: 64 hexadecimal
// characters, HMAC-SHA256 of the effect id under the deployment's callback key. Connectors receive
// it in Call.CallbackSecret; an endpoint that takes callbacks for effects verifies their
// Reckon-Signature with it (cmd/server does). It is a credential for settling that one effect:
// never log it or store it in the clear. The key is read from the database on the first call
// (an error then is the database's; the next call tries again) and kept.
func (c *Client) CallbackSecret(ctx context.Context, effectID uuid.UUID) (string, error) {
	key, err := c.callbackKey.get(ctx, c)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(callbackSecretLabel))
	mac.Write(effectID[:])
	return hex.EncodeToString(mac.Sum(nil)), nil
}

func (k *callbackKey) get(ctx context.Context, c *Client) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key == nil {
		key, err := c.queries.CallbackKeyGet(ctx)
		if postgres.NoRows(err) {
			return nil, fmt.Errorf("%w: reckon_callback_keys has no key", ErrSchemaNotCurrent)
		}
		if err != nil {
			return nil, fmt.Errorf("effects: read the callback key: %w", err)
		}
		k.key = key
	}
	return k.key, nil
}
