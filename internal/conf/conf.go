// Package conf holds the one way Reckon's constructors take their configuration: copied (the
// caller's value is never changed), defaults filled in, then validated.
package conf

// Resolve returns a copy of *config — the zero T when config is nil — with setDefaults applied,
// or what its Validate reports then.
func Resolve[T any, P interface {
	*T
	Validate() error
}](config *T, setDefaults func(P)) (T, error) {
	var c T
	if config != nil {
		c = *config
	}
	setDefaults(&c)
	if err := P(&c).Validate(); err != nil {
		var zero T
		return zero, err
	}
	return c, nil
}
