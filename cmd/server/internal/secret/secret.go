// Package secret makes the server's bearer secrets — API tokens, operator tokens, the console's
// session ids — and the one form of them the database keeps: their SHA-256. A secret is a prefix
// naming its kind followed by 32 random bytes in unpadded base64url (43 characters).
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// randomLen is the number of random bytes in a secret.
const randomLen = 32

// encodedLen is the length of a secret after its prefix: randomLen bytes in unpadded base64url.
var encodedLen = base64.RawURLEncoding.EncodedLen(randomLen)

// shownLen is how many characters after the prefix Secret.Prefix keeps.
const shownLen = 6

// Secret is a new secret: its value, to be shown once, and what is stored of it.
type Secret struct {
	// Value is the secret itself: the prefix, then 43 base64url characters.
	Value string
	// Prefix is Value's first characters (the prefix and 6 more), to tell secrets apart.
	Prefix string
	// SHA256 is Hash(Value), the only form the database keeps.
	SHA256 []byte
}

// New makes a secret that starts with prefix. It fails only if the system's randomness does.
func New(prefix string) (Secret, error) {
	random := make([]byte, randomLen)
	if _, err := rand.Read(random); err != nil {
		return Secret{}, fmt.Errorf("secret randomness: %w", err)
	}
	value := prefix + base64.RawURLEncoding.EncodeToString(random)
	return Secret{Value: value, Prefix: value[:len(prefix)+shownLen], SHA256: Hash(value)}, nil
}

// Hash is the SHA-256 of value, as the database stores a secret.
func Hash(value string) []byte {
	sum := sha256.Sum256([]byte(value))
	return sum[:]
}

// WellFormed reports whether value could have been made by New(prefix): the prefix, then exactly
// 43 base64url characters. Anything else (another length, NUL bytes, invalid UTF-8, spaces) is
// not, and can be refused without asking the database.
func WellFormed(value, prefix string) bool {
	rest, ok := strings.CutPrefix(value, prefix)
	if !ok || len(rest) != encodedLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
