package ops

import (
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
)

// badCursor is the error of an "after" that is not a cursor from a previous page.
var badCursor = &FieldError{Field: "after", Message: pagecursor.ErrInvalid.Error()}

// parseCursor reads an "after" cursor (package pagecursor, the form console links and CLI flags
// carry); anything else is a *FieldError on "after".
func parseCursor(s string) (pagecursor.Cursor, error) {
	c, err := pagecursor.Parse(s)
	if err != nil {
		return pagecursor.Cursor{}, badCursor
	}
	return c, nil
}

// uuidCursor reads an "after" cursor whose ID is a UUID (effects, sagas).
func uuidCursor(s string) (time.Time, uuid.UUID, error) {
	at, id, err := pagecursor.ParseUUID(s)
	if err != nil {
		return time.Time{}, uuid.Nil, badCursor
	}
	return at, id, nil
}
