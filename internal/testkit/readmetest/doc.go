// Package readmetest keeps README.md's Go examples working, and those of docs/ that came from it.
// Its tests extract every ```go block of the README, and every one of docs/*.md whose fence follows
// the line <!-- compiled by internal/testkit/readmetest --> (the other blocks of docs/ are sketches), and
// treat it by what it is (a complete file only in README.md):
//
//   - A complete file (it starts with a package clause) is what a new user copies into their own
//     module: TestReadmeFilesRun puts it in a new module that requires github.com/reckonhq/reckon
//     (replaced by this checkout, dependencies from the module cache, no network) and runs go vet,
//     then go test for a _test package (against the test database's server) or go build.
//   - A block of declarations (it parses as a Go file once "package readmetest" is put before it)
//     is placed at the top level of a generated file of this package as it is.
//   - Any other block is the body of a func(ctx context.Context) error; "return nil" is added
//     when its last statement is not a return. Each block is a function of its own, so blocks
//     do not share local variables, and every variable a block declares must be used, every error
//     checked or returned, as in real code.
//
// TestReadmeGoBlocksCompile type-checks the last two kinds with go build and go vet. Imports are
// added from the packages a block names, public packages only; the names a block leaves to the
// reader (the connector functions, the renderer's client, the ids, the pool of a later block)
// are declared in stubs.go, in terms of public packages too.
//
// Errors point at README.md's lines (the generated and copied code carries //line directives).
package readmetest
