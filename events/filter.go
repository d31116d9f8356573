package events

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Filter selects events.
type Filter struct {
	// Patterns select event types: "*" (every type), "turn.*" (a category) or "turn.superseded"
	// (one type). An event matches when it matches any; no patterns match every event. At most
	// MaxPatterns, each a category and a name of lowercase letters and underscores.
	Patterns []string
	// Tenant, when set, selects the events of one tenant.
	Tenant string
}

// MaxPatterns is the most patterns a Filter may have.
const MaxPatterns = 32

// PatternError is a pattern of a Filter that is not one: the HTTP API answers it with 400 naming
// the pattern parameter.
type PatternError struct {
	Pattern string
	Problem string
}

// Error quotes the pattern (shortened when long) and says what is wrong with it.
func (e *PatternError) Error() string {
	return fmt.Sprintf("events: pattern %q %s", truncate(e.Pattern), e.Problem)
}

var (
	typeRE     = regexp.MustCompile(`^[a-z][a-z_]{0,63}\.[a-z][a-z_]{0,63}$`)
	categoryRE = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)
)

// Match reports whether the event type typ matches pattern (see Filter.Patterns).
func Match(pattern, typ string) bool {
	if pattern == "*" {
		return true
	}
	if category, ok := strings.CutSuffix(pattern, ".*"); ok {
		c, _, _ := strings.Cut(typ, ".")
		return c == category
	}
	return pattern == typ
}

// ValidatePattern returns a *PatternError when pattern is not "*", "category.*" or
// "category.name".
func ValidatePattern(pattern string) error {
	switch {
	case !utf8.ValidString(pattern) || strings.ContainsRune(pattern, 0):
		return &PatternError{Pattern: pattern, Problem: "is not valid UTF-8 text"}
	case pattern == "*":
		return nil
	}
	if category, ok := strings.CutSuffix(pattern, ".*"); ok {
		if categoryRE.MatchString(category) {
			return nil
		}
	} else if typeRE.MatchString(pattern) {
		return nil
	}
	return &PatternError{Pattern: pattern, Problem: `is not "*", "category.*" or "category.name" (lowercase letters and underscores)`}
}

// matcher is a Filter as the database query takes it.
type matcher struct {
	all        bool
	types      []string
	categories []string
}

func (f Filter) compile() (matcher, error) {
	if len(f.Patterns) > MaxPatterns {
		return matcher{}, &PatternError{Pattern: f.Patterns[MaxPatterns], Problem: fmt.Sprintf("is one too many (at most %d patterns)", MaxPatterns)}
	}
	if !utf8.ValidString(f.Tenant) || strings.ContainsRune(f.Tenant, 0) || len(f.Tenant) > 200 {
		return matcher{}, fmt.Errorf("events: tenant is not valid UTF-8 text of at most 200 bytes")
	}
	m := matcher{all: len(f.Patterns) == 0, types: []string{}, categories: []string{}}
	for _, p := range f.Patterns {
		if err := ValidatePattern(p); err != nil {
			return matcher{}, err
		}
		switch category, ok := strings.CutSuffix(p, ".*"); {
		case p == "*":
			m.all = true
		case ok:
			m.categories = append(m.categories, category)
		default:
			m.types = append(m.types, p)
		}
	}
	return m, nil
}
