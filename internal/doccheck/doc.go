// Package doccheck holds no code: its test checks the repository the way pkg.go.dev will show it —
// LICENSE is recognised as Apache-2.0, and every public package and every exported name in it has a
// doc comment.
package doccheck
