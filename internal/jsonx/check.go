package jsonx

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What Postgres stores. Reckon keeps text in text columns and documents in jsonb; Postgres refuses
// some values that Go and encoding/json accept, and a refused value aborts the whole transaction
// it was written in. Check and CheckText find such values first, so that they are refused with an
// error naming where they are, before anything is written.
//
// Postgres refuses:
//   - in text and in jsonb strings: the NUL character (U+0000, escaped as \u0000 in JSON) and
//     bytes that are not UTF-8. In JSON also an escaped lone surrogate (\ud800 without a low
//     surrogate after it, or a low surrogate alone), which names no character;
//   - in jsonb numbers (stored as numeric): a value of 10^131072 or more in magnitude, more than
//     16383 digits after the decimal point (1e-16384 has 16384), and an exponent beyond ±2^30.
//
// Check also bounds nesting at MaxDepth: Postgres's parser recurses once per level.

// MaxDepth is the deepest nesting of arrays and objects Check accepts.
const MaxDepth = 512

// Limits of Postgres's numeric type, which stores jsonb numbers (src/include/utils/numeric.h).
const (
	numericMaxScale    = 16383     // NUMERIC_DSCALE_MAX: digits after the decimal point
	numericMaxDigitExp = 131071    // the largest power of ten a leading digit may have
	numericMaxExponent = 1<<30 - 1 // numeric_in refuses an exponent of INT_MAX/2 or more
)

// Error says where a document holds a value Postgres cannot store, and why.
type Error struct {
	// Path locates the value: "" for the document itself, else object keys and array indexes,
	// e.g. "items[2].name".
	Path string
	// Problem says what is wrong with it.
	Problem string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + ": " + e.Problem
}

// CheckText reports whether Postgres can store s as text: valid UTF-8 without NUL. The error is a
// *Error with no path.
func CheckText(s string) error {
	if !utf8.ValidString(s) {
		return &Error{Problem: "not valid UTF-8"}
	}
	if strings.IndexByte(s, 0) >= 0 {
		return &Error{Problem: "contains a NUL character (U+0000), which Postgres cannot store"}
	}
	return nil
}

// Check reports whether doc is one JSON value that Postgres can store as jsonb (see above). The
// error is a *Error naming where the first offending value is.
func Check(doc []byte) error { return check(doc, false) }

// CheckStrict is Check that also refuses an object with the same key twice (encoding/json keeps
// the last one, which hides the first from whoever reads the document after it): for request
// bodies, where a repeated key is a mistake or an attempt to confuse.
func CheckStrict(doc []byte) error { return check(doc, true) }

func check(doc []byte, noDuplicates bool) error {
	if !json.Valid(doc) {
		return &Error{Problem: "not valid JSON"}
	}
	c := &checker{doc: doc, noDuplicates: noDuplicates}
	c.skipSpace()
	return c.value(0)
}

// checker walks a document that json.Valid accepted, so it checks values, not syntax.
type checker struct {
	doc          []byte
	pos          int
	noDuplicates bool
	path         []string // path segments of the value being checked: ".key" or "[i]"
}

func (c *checker) fail(format string, args ...any) error {
	return &Error{Path: strings.TrimPrefix(strings.Join(c.path, ""), "."), Problem: fmt.Sprintf(format, args...)}
}

func (c *checker) skipSpace() {
	for c.pos < len(c.doc) {
		switch c.doc[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *checker) value(depth int) error {
	switch b := c.doc[c.pos]; {
	case b == '{' || b == '[':
		if depth == MaxDepth {
			return c.fail("nested deeper than %d levels", MaxDepth)
		}
		if b == '{' {
			return c.object(depth + 1)
		}
		return c.array(depth + 1)
	case b == '"':
		_, err := c.str(false)
		return err
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	default: // true, false, null
		for c.pos < len(c.doc) && c.doc[c.pos] >= 'a' && c.doc[c.pos] <= 'z' {
			c.pos++
		}
		return nil
	}
}

func (c *checker) object(depth int) error {
	c.pos++ // {
	var seen map[string]bool
	if c.noDuplicates {
		seen = map[string]bool{}
	}
	for {
		c.skipSpace()
		if c.doc[c.pos] == '}' {
			c.pos++
			return nil
		}
		key, err := c.str(true)
		if err != nil {
			return err
		}
		c.path = append(c.path, segment(key))
		if seen != nil {
			if seen[key] {
				return c.fail("the key is given twice")
			}
			seen[key] = true
		}
		c.skipSpace()
		c.pos++ // :
		c.skipSpace()
		if err := c.element(depth); err != nil {
			return err
		}
	}
}

func (c *checker) array(depth int) error {
	c.pos++ // [
	for i := 0; ; i++ {
		c.skipSpace()
		if c.doc[c.pos] == ']' {
			c.pos++
			return nil
		}
		c.path = append(c.path, "["+strconv.Itoa(i)+"]")
		if err := c.element(depth); err != nil {
			return err
		}
	}
}

// element checks the value of an object member or array element, whose segment ends the path,
// then leaves it and steps over the comma that may follow.
func (c *checker) element(depth int) error {
	if err := c.value(depth); err != nil {
		return err
	}
	c.path = c.path[:len(c.path)-1]
	c.skipSpace()
	if c.doc[c.pos] == ',' {
		c.pos++
	}
	return nil
}

// segment is a path segment for an object key: ".key" when the key reads well in a path, else
// the key quoted.
func segment(key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return "." + key
	}
	return "[" + strconv.QuoteToASCII(key) + "]"
}

// str checks the string at pos (a key or a value) and, when decode is set (a key: for the path and
// the duplicate-key check), returns it decoded; a key that cannot be stored fails with the path
// of its object.
func (c *checker) str(decode bool) (string, error) {
	start := c.pos
	c.pos++ // "
	escaped := false
	for {
		b := c.doc[c.pos]
		if b == '"' {
			break
		}
		if b == '\\' {
			escaped = true
			if c.doc[c.pos+1] == 'u' {
				if err := c.escape(); err != nil {
					return "", err
				}
				continue
			}
			c.pos++
		}
		c.pos++
	}
	raw := c.doc[start+1 : c.pos]
	c.pos++ // "
	if !utf8.Valid(raw) {
		return "", c.fail("a string is not valid UTF-8")
	}
	if !decode {
		return "", nil
	}
	if !escaped {
		return string(raw), nil
	}
	var s string
	_ = json.Unmarshal(c.doc[start:c.pos], &s) // valid: json.Valid accepted the document
	return s, nil
}

// escape checks the \uXXXX escape at pos and moves past it (and past the low surrogate that must
// follow a high one).
func (c *checker) escape() error {
	r := c.hex4(c.pos + 2)
	c.pos += 6
	switch {
	case r == 0:
		return c.fail(`a string contains \u0000 (NUL), which Postgres cannot store`)
	case r >= 0xDC00 && r <= 0xDFFF:
		return c.fail(`a string contains a lone surrogate \u%04x, which is no character`, r)
	case r >= 0xD800 && r <= 0xDBFF:
		if c.pos+6 > len(c.doc) || c.doc[c.pos] != '\\' || c.doc[c.pos+1] != 'u' {
			return c.fail(`a string contains a lone surrogate \u%04x, which is no character`, r)
		}
		if low := c.hex4(c.pos + 2); low < 0xDC00 || low > 0xDFFF {
			return c.fail(`a string contains a lone surrogate \u%04x, which is no character`, r)
		}
		c.pos += 6
	}
	return nil
}

func (c *checker) hex4(at int) rune {
	n, _ := strconv.ParseUint(string(c.doc[at:at+4]), 16, 32) // valid: json.Valid checked it
	return rune(n)
}

// number checks that the number at pos fits Postgres's numeric type.
func (c *checker) number() error {
	start := c.pos
	for c.pos < len(c.doc) && strings.IndexByte("+-0123456789.eE", c.doc[c.pos]) >= 0 {
		c.pos++
	}
	if !numericFits(string(c.doc[start:c.pos])) {
		n := string(c.doc[start:c.pos])
		if len(n) > 24 {
			n = n[:20] + "…"
		}
		return c.fail("the number %s is outside the range Postgres stores (below 1e131072 in magnitude, at most 16383 decimal places)", n)
	}
	return nil
}

// numericFits reports whether Postgres's numeric type holds n, a JSON number, following
// numeric_in: the exponent is at most ±2^30; the scale (digits after the decimal point, as
// written, less the exponent) at most numericMaxScale; the leading nonzero digit's power of ten at
// most numericMaxDigitExp.
func numericFits(n string) bool {
	n = strings.TrimPrefix(n, "-")
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	exponent := 0
	if hasExp {
		e, err := strconv.Atoi(exp) // accepts a leading + or -
		if err != nil || e >= numericMaxExponent || e <= -numericMaxExponent {
			return false
		}
		exponent = e
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	if max(0, len(frac)-exponent) > numericMaxScale {
		return false
	}
	digits := intPart + frac
	first := strings.IndexFunc(digits, func(r rune) bool { return r != '0' })
	if first < 0 {
		return true // zero
	}
	return len(intPart)-1-first+exponent <= numericMaxDigitExp
}

// CheckTexts is CheckText of the values of name, value pairs; the error names the first value
// Postgres cannot store, e.g. "IdempotencyKey: not valid UTF-8" (a *Error with Path name).
func CheckTexts(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := CheckText(pairs[i+1]); err != nil {
			return &Error{Path: pairs[i], Problem: err.(*Error).Problem}
		}
	}
	return nil
}

// SafeText is s as Postgres text can hold it: invalid UTF-8 and NUL characters replaced by U+FFFD.
// For text that only informs (an upstream's error message), where refusing would lose the rest.
func SafeText(s string) string {
	if CheckText(s) == nil {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
