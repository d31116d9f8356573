package jsonx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// hostile are documents Postgres's jsonb refuses, with the path Check must name.
var hostile = []struct {
	name, doc, path string
}{
	{"NUL escape", `{"a":"x\u0000y"}`, "a"},
	{"NUL escape in a key", `{"k\u0000":1}`, ""},
	{"lone high surrogate", `{"a":["ok","\ud800"]}`, "a[1]"},
	{"high surrogate then text", `{"a":"\ud800abcdef"}`, "a"},
	{"high surrogate then another high one", `{"a":"\ud800\ud800"}`, "a"},
	{"lone low surrogate", `{"a":{"b":"\udc00"}}`, "a.b"},
	{"raw invalid UTF-8", "{\"a\":\"\xff\xfe\"}", "a"},
	{"overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", "a"},
	{"UTF-8 of a surrogate", "{\"a\":\"\xed\xa0\x80\"}", "a"},
	{"huge number", `{"n":1e1000000}`, "n"},
	{"huge negative number", `{"n":-1e1000000}`, "n"},
	{"tiny number", `{"n":1e-1000000}`, "n"},
	{"200,000-digit integer", `{"n":` + "1" + strings.Repeat("0", 199999) + `}`, "n"},
	{"exponent beyond int", `{"n":1e99999999999999999999}`, "n"},
	{"odd key", `{"a b":{"c":"\u0000"}}`, `["a b"].c`},
	{"deep nesting", strings.Repeat("[", jsonx.MaxDepth+1) + strings.Repeat("]", jsonx.MaxDepth+1), strings.Repeat("[0]", jsonx.MaxDepth)},
	{"not JSON", `{"a":`, ""},
}

func TestCheckRefusesWhatPostgresRefuses(t *testing.T) {
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			err := jsonx.Check([]byte(tc.doc))
			var checkErr *jsonx.Error
			require.ErrorAs(t, err, &checkErr)
			require.Equal(t, tc.path, checkErr.Path, "path named: %v", err)
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `null`, `"x"`, `0`, `-0.0e-5`, `{"a":[1,2,{"b":null}],"c":"\ud83d\ude00 é \u00e9 \n"}`,
		`1e131071`, `-9.99e131071`, `1e-16383`, `0.` + "0" + strings.Repeat("1", 16382), `0e131072`,
		strings.Repeat("[", jsonx.MaxDepth) + strings.Repeat("]", jsonx.MaxDepth),
		`{"a":1,"a":2}`,
	} {
		require.NoError(t, jsonx.Check([]byte(doc)), "%.60s", doc)
	}
}

func TestCheckStrictRefusesDuplicateKeys(t *testing.T) {
	err := jsonx.CheckStrict([]byte(`{"a":{"b":1,"b":2}}`))
	var checkErr *jsonx.Error
	require.ErrorAs(t, err, &checkErr)
	require.Equal(t, "a.b", checkErr.Path)
	require.ErrorAs(t, jsonx.CheckStrict([]byte(`{"a":1,"\u0061":2}`)), &checkErr, "the same key escaped")
	require.NoError(t, jsonx.CheckStrict([]byte(`{"a":1,"A":2,"b":{"a":1}}`)))
}

func TestCheckText(t *testing.T) {
	require.NoError(t, jsonx.CheckText("café ☕"))
	require.Error(t, jsonx.CheckText("a\x00b"))
	require.Error(t, jsonx.CheckText("caf\xe9"))
	require.Error(t, jsonx.CheckText("\xed\xa0\x80"))
}

// TestCheckAgreesWithPostgres stores every case as jsonb: Check accepts exactly what Postgres
// does, at the edges of numeric's range too.
func TestCheckAgreesWithPostgres(t *testing.T) {
	pool := pgtest.NewEmptyDB(t)
	ctx := context.Background()
	docs := []string{
		`1e131071`, `1e131072`, `9.9999e131071`, `99e131070`, `99e131071`, `-1e131072`,
		`1e-16383`, `1e-16384`, `1.5e-16382`, `1.5e-16383`, `0e-16383`, `0e-16384`, `0e1000000`,
		`0.` + strings.Repeat("0", 16383), `0.` + strings.Repeat("0", 16384),
		`1` + strings.Repeat("0", 131071), `1` + strings.Repeat("0", 131072),
		`0.00001e131076`, `0.00001e131077`, `123.456e-16380`, `123.456e-16381`,
		`1e1073741822`, `0e1073741823`, `1E+5`, `-0`,
		`"\ud83d\ude00"`, `"\udbff\udfff"`, `"\ud7ff"`, `"\ue000"`, "\"\xf4\x8f\xbf\xbf\"", "\"\xf4\x90\x80\x80\"",
	}
	for _, tc := range hostile {
		docs = append(docs, tc.doc)
	}
	for _, doc := range docs {
		_, pgErr := pool.Exec(ctx, `SELECT $1::text::jsonb`, doc)
		if !utf8.ValidString(doc) || strings.Contains(doc, "\x00") {
			// pgx cannot even send it as text; Check must refuse it all the same.
			require.Error(t, jsonx.Check([]byte(doc)), "%.60s", doc)
			continue
		}
		if strings.HasPrefix(doc, "[[[[") {
			continue // Postgres takes deeper nesting than MaxDepth: Check is stricter on purpose
		}
		checkErr := jsonx.Check([]byte(doc))
		require.Equal(t, pgErr == nil, checkErr == nil, "%.60s: Postgres: %v; Check: %v", doc, pgErr, checkErr)
	}
}

// FuzzCheck: Check never panics, and what it accepts is valid JSON whose strings hold neither NUL
// nor anything but UTF-8 once decoded.
func FuzzCheck(f *testing.F) {
	for _, tc := range hostile {
		f.Add([]byte(tc.doc))
	}
	f.Add([]byte(`{"a":[1,"b",{"c":null,"d":true}],"e":-1.5e-3}`))
	f.Add([]byte(`"\ud83d\ude00\\u0000"`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := jsonx.Check(doc)
		strictErr := jsonx.CheckStrict(doc)
		if err != nil {
			require.Error(t, strictErr, "CheckStrict accepted what Check refused")
			var checkErr *jsonx.Error
			require.True(t, errors.As(err, &checkErr))
			return
		}
		require.True(t, json.Valid(doc))
		require.True(t, utf8.Valid(doc), "accepted bytes that are not UTF-8")
		// encoding/json decodes a lone surrogate as U+FFFD: one in the decoded strings must be
		// in the document itself.
		replacement := bytes.Contains(bytes.ToLower(doc), []byte(`\ufffd`)) || bytes.ContainsRune(doc, utf8.RuneError)
		var v any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber() // a number past float64's range is fine for jsonb
		require.NoError(t, dec.Decode(&v))
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				require.NotContains(t, v, "\x00")
				if !replacement {
					require.NotContains(t, v, "\uFFFD", "a lone surrogate was accepted")
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			case map[string]any:
				for k, e := range v {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}
