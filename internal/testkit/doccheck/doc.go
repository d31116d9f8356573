// Package doccheck holds no code: its test checks the repository the way pkg.go.dev will show it —
// LICENSE is recognised as Apache-2.0, and every public package and every exported name in it has a
// doc comment — and that every relative link and anchor of README.md, CHANGELOG.md and docs/*.md
// resolves.
package doccheck
