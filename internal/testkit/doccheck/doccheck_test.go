package doccheck_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/licensecheck"
	"github.com/stretchr/testify/require"
)

// TestLicense: LICENSE at the root is Apache-2.0 to the scanner pkg.go.dev uses, covering at least
// 90% of the file (pkg.go.dev shows no documentation for a module whose license it cannot detect).
func TestLicense(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(filepath.Join(moduleRoot(t), "LICENSE"))
	require.NoError(t, err)
	coverage := licensecheck.Scan(text)
	require.GreaterOrEqual(t, coverage.Percent, 90.0, "LICENSE coverage: %+v", coverage)
	var ids []string
	for _, m := range coverage.Match {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"Apache-2.0"}, ids)
}

// TestDocComments: every public package (not under internal/, cmd/ or tools/) has a package doc
// comment, and each of its exported consts, vars, types, funcs and methods a doc comment (a
// grouped const or var block's comment documents the group). Struct fields and interface methods
// are not checked. The non-test files of the current platform are read, as go doc reads them.
func TestDocComments(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	var missing []string
	dirs, err := publicPackageDirs(root)
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		m, err := undocumented(root, dir)
		require.NoError(t, err)
		missing = append(missing, m...)
	}
	require.Empty(t, missing, "undocumented (%d):\n%s", len(missing), strings.Join(missing, "\n"))
}

// moduleRoot is the directory of go.mod, above this package's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

// publicPackageDirs are the directories under root holding a public package's Go files: not
// internal/ (at any depth), cmd/, tools/, testdata/, or what the go command ignores (_x, .x).
func publicPackageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if path != root {
			switch {
			case strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"),
				name == "internal" || name == "testdata" || name == "vendor",
				rel == "cmd" || rel == "tools":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		if pkg, err := build.ImportDir(path, 0); err == nil && len(pkg.GoFiles) > 0 && pkg.Name != "main" {
			dirs = append(dirs, rel)
		}
		return nil
	})
	return dirs, err
}

// undocumented lists, as file:line: name, the package doc comment and the exported names of the
// package in dir (relative to root) that have none.
func undocumented(root, dir string) ([]string, error) {
	pkg, err := build.ImportDir(filepath.Join(root, dir), 0)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		file, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	docs, err := doc.NewFromFiles(fset, files, "github.com/reckonhq/reckon/"+filepath.ToSlash(dir))
	if err != nil {
		return nil, err
	}

	var missing []string
	report := func(pos token.Pos, what string) {
		p := fset.Position(pos)
		file, err := filepath.Rel(root, p.Filename)
		if err != nil {
			file = p.Filename
		}
		missing = append(missing, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(file), p.Line, what))
	}
	if strings.TrimSpace(docs.Doc) == "" {
		missing = append(missing, fmt.Sprintf("%s: package %s has no package doc comment", filepath.ToSlash(dir), docs.Name))
	}
	values := func(values []*doc.Value) {
		for _, v := range values {
			if v.Doc != "" {
				continue // the group's comment
			}
			for _, spec := range v.Decl.Specs {
				spec := spec.(*ast.ValueSpec)
				if spec.Doc != nil || spec.Comment != nil {
					continue
				}
				for _, name := range spec.Names {
					if name.IsExported() {
						report(name.Pos(), v.Decl.Tok.String()+" "+name.Name)
					}
				}
			}
		}
	}
	funcs := func(funcs []*doc.Func) {
		for _, f := range funcs {
			if f.Doc != "" {
				continue
			}
			name := f.Name
			if f.Recv != "" {
				name = "(" + strings.TrimPrefix(f.Recv, "*") + ")." + name
			}
			report(f.Decl.Pos(), "func "+name)
		}
	}
	values(docs.Consts)
	values(docs.Vars)
	funcs(docs.Funcs)
	for _, typ := range docs.Types {
		if typ.Doc == "" {
			pos := typ.Decl.Pos()
			for _, spec := range typ.Decl.Specs {
				if spec := spec.(*ast.TypeSpec); spec.Name.Name == typ.Name {
					pos = spec.Pos() // in a group, the type's own line
				}
			}
			report(pos, "type "+typ.Name)
		}
		values(typ.Consts)
		values(typ.Vars)
		funcs(typ.Funcs)
		funcs(typ.Methods)
	}
	return missing, nil
}
