// Package pagecursor is the one form of the cursors the server hands out where a page of a listing
// ends — the HTTP API's next_cursor, the console's links and the CLI's -after: the sort time and the
// id of the page's last row, opaque and URL-safe.
package pagecursor

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/jsonx"
)

// Cursor is where a page ended: the sort time and the id of its last row.
type Cursor struct {
	At time.Time
	ID string
}

// maxLen bounds a cursor's string form: a time and an id, far below it.
const maxLen = 512

// ErrInvalid is the error of a string that is not a cursor made by String.
var ErrInvalid = errors.New("not a cursor from a previous page")

// String is the cursor's opaque form: base64url of "{At in Unix microseconds}/{ID}". Postgres keeps
// microseconds, so the round trip is exact.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At.UnixMicro(), 10) + "/" + c.ID))
}

// Parse reads a cursor made by Cursor.String; anything else is ErrInvalid.
func Parse(s string) (Cursor, error) {
	if s == "" || len(s) > maxLen {
		return Cursor{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrInvalid
	}
	micros, id, ok := strings.Cut(string(raw), "/")
	if !ok || id == "" {
		return Cursor{}, ErrInvalid
	}
	n, err := strconv.ParseInt(micros, 10, 64)
	at := time.UnixMicro(n).UTC()
	if err != nil || at.Year() < 1 || at.Year() > 9999 { // Postgres's timestamptz range
		return Cursor{}, ErrInvalid
	}
	if jsonx.CheckText(id) != nil { // what Postgres cannot store in text
		return Cursor{}, ErrInvalid
	}
	return Cursor{At: at, ID: id}, nil
}

// ParseUUID reads a cursor whose id is a UUID (effects, sagas); anything else is ErrInvalid.
func ParseUUID(s string) (time.Time, uuid.UUID, error) {
	c, err := Parse(s)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	id, err := uuid.Parse(c.ID)
	if err != nil {
		return time.Time{}, uuid.Nil, ErrInvalid
	}
	return c.At, id, nil
}
