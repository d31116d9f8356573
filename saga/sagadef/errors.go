package sagadef

import "errors"

// Sentinel errors. Test with errors.Is.
var (
	// ErrInvalid: a definition breaks the rules (package documentation); nothing was stored.
	ErrInvalid = errors.New("sagadef: invalid definition")
	// ErrExists: a different definition of that name is stored; definitions never change.
	ErrExists = errors.New("sagadef: a different definition of that name exists")
	// ErrNotFound: no definition of that name is stored.
	ErrNotFound = errors.New("sagadef: definition not found")
)
