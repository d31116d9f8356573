package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// CheckFields reports an object key of doc that matches none of the JSON field names of v (a
// struct or a pointer to one) exactly, or whose value is null where the field cannot hold it
// (nullable), as a *Error naming it: encoding/json would take "CONNECTOR" for "connector", ignore
// what it cannot place and skip a null. It walks nested structs and slices; a value of the wrong
// type is left for the decoder to report.
func CheckFields(doc []byte, v any) error { return checkFields(doc, reflect.TypeOf(v), "") }

func checkFields(raw json.RawMessage, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // decodes itself: json.RawMessage, uuid.UUID, time.Time
	}
	switch t.Kind() {
	case reflect.Struct:
		var object map[string]json.RawMessage
		if json.Unmarshal(raw, &object) != nil {
			return nil
		}
		fields := jsonFields(t)
		for _, key := range slices.Sorted(maps.Keys(object)) {
			field, ok := fields[key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						return &Error{Path: path + key, Problem: fmt.Sprintf("unknown field: did you mean %q? (field names are case-sensitive)", path+name)}
					}
				}
				return &Error{Path: path + key, Problem: "unknown field"}
			}
			if string(bytes.TrimSpace(object[key])) == "null" && !nullable(field) {
				return &Error{Path: path + key, Problem: "null is not a value of this field: leave the field out for its default"}
			}
			if err := checkFields(object[key], field, path+key+"."); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return nil
		}
		for _, elem := range elems {
			if err := checkFields(elem, t.Elem(), strings.TrimSuffix(path, ".")+"[]."); err != nil {
				return err
			}
		}
	}
	return nil
}

// nullable says whether JSON's null is a value of a field of type t: a pointer, an interface or a
// type that decodes itself (json.RawMessage, time.Time) may take it; encoding/json would leave
// any other field (a string, a number, a list, an object) as it was, so that a null would pass
// for an absent field where the API's documents do not allow it.
func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		return true
	}
	return reflect.PointerTo(t).Implements(unmarshalerType)
}

// jsonFields are a struct's fields by the name encoding/json gives them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "" && f.Anonymous:
			for n, ft := range jsonFields(f.Type) {
				fields[n] = ft
			}
			continue
		case name == "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// DecodeStrict decodes doc, one JSON object, into v (a pointer to a struct) strictly: a key that
// matches no field exactly (CheckFields), a value of the wrong type and data after the object are
// errors, each a *Error naming the field where there is one.
func DecodeStrict(doc []byte, v any) error {
	if err := CheckFields(doc, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return &Error{Path: typeErr.Field, Problem: fmt.Sprintf("want %s, got JSON %s", typeErr.Type, typeErr.Value)}
		}
		return err
	}
	if dec.More() {
		return &Error{Problem: "unexpected data after the JSON object"}
	}
	return nil
}
