package ops

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Cursor is where a page of a listing ended: the sort time and the id of its last row. Its String
// form is opaque and URL-safe, so that console links and CLI flags (-after) carry it; ParseCursor
// reads it back.
type Cursor struct {
	At time.Time
	ID string
}

// maxCursorLen bounds a cursor's string form: a time and an id, far below it.
const maxCursorLen = 512

// String is the cursor's opaque form: base64url of "{At in Unix microseconds}/{ID}". Postgres keeps
// microseconds, so the round trip is exact.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At.UnixMicro(), 10) + "/" + c.ID))
}

// ParseCursor reads a cursor made by Cursor.String. Anything else is a *FieldError on "after".
func ParseCursor(s string) (Cursor, error) {
	bad := &FieldError{Field: "after", Message: "not a cursor from a previous page"}
	if s == "" || len(s) > maxCursorLen {
		return Cursor{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	micros, id, ok := strings.Cut(string(raw), "/")
	if !ok || id == "" {
		return Cursor{}, bad
	}
	n, err := strconv.ParseInt(micros, 10, 64)
	at := time.UnixMicro(n).UTC()
	if err != nil || at.Year() < 1 || at.Year() > 9999 { // Postgres's timestamptz range, as parseTime
		return Cursor{}, bad
	}
	if err := checkText(id); err != nil {
		return Cursor{}, bad
	}
	return Cursor{At: at, ID: id}, nil
}

// uuidCursor reads a cursor whose ID is a UUID (effects, sagas).
func uuidCursor(s string) (time.Time, uuid.UUID, error) {
	c, err := ParseCursor(s)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	id, err := uuid.Parse(c.ID)
	if err != nil {
		return time.Time{}, uuid.Nil, &FieldError{Field: "after", Message: fmt.Sprintf("not a cursor from a previous page (%v)", err)}
	}
	return c.At, id, nil
}
