package httpconn

import "errors"

// ErrInvalid is wrapped by every error that rejects a definition. Nothing is stored.
var ErrInvalid = errors.New("httpconn: invalid connector definition")

// Sentinel errors of the store. Test with errors.Is.
var (
	// ErrNotFound: no HTTP connector of that name is stored.
	ErrNotFound = errors.New("httpconn: connector not found")
	// ErrInUse: the connector still has PENDING or UNKNOWN effects; deleting it would leave them
	// waiting for a connector no reactor has.
	ErrInUse = errors.New("httpconn: connector has unresolved effects")
)
