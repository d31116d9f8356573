// Package jsonx holds the JSON helpers shared by effects, saga and turns: values given as "a
// json.RawMessage, []byte of JSON, or anything encoding/json marshals", and equality by value.
package jsonx

import (
	"encoding/json"
	"reflect"
)

// Marshal returns v as JSON that Postgres can store as jsonb (Check): a json.RawMessage or []byte
// is taken as it is, nil is {}, anything else is marshalled by encoding/json. The error of a
// document Postgres would refuse is a *Error naming where.
func Marshal(v any) (json.RawMessage, error) {
	var raw []byte
	switch a := v.(type) {
	case nil:
		return json.RawMessage(`{}`), nil
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		var err error
		if raw, err = json.Marshal(a); err != nil {
			return nil, err
		}
	}
	if err := Check(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Equal compares two JSON documents by value, as jsonb does: key order and spacing do not count.
// Invalid JSON equals nothing.
func Equal(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
