// Package readmetest keeps README.md's Go examples compiling: its test extracts every ```go block
// of the README, wraps each in a function of a generated file of this package and type-checks the
// package with `go vet`.
//
// The convention the README's blocks follow:
//
//   - A block of declarations (it parses as a Go file once "package readmetest" is put before it)
//     is placed at the top level as it is.
//   - Any other block is the body of a func(ctx context.Context) error; "return nil" is added
//     when its last statement is not a return. Each block is a function of its own, so blocks
//     do not share local variables, and every variable a block declares must be used, every error
//     checked or returned, as in real code.
//   - Names a block leaves to the reader (the connector functions, the ids, the pool of a later
//     block) are declared in stubs.go; package renderer stands for the upstream of the async
//     example. Imports are added from the packages the block names.
//
// Errors point at README.md's lines (the generated code carries //line directives).
package readmetest
