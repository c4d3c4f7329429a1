package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/hint"
)

// FieldError is a problem with one field of decoded options: Path names it
// from the root ("options.sandbox.arguments.max_turns"), Problem says what
// is wrong.
type FieldError struct {
	Path    string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + ": " + e.Problem
}

// DecodeOptions decodes a JSON object into Options, strictly: an unknown
// field, a value of the wrong type or invalid JSON is a *FieldError whose
// path starts with root ("options"). JSON null, or no data, sets nothing.
func DecodeOptions(root string, data []byte) (Options, error) {
	var o Options
	if err := decodeStrict(root, data, &o); err != nil {
		return Options{}, err
	}
	if err := o.Check(); err != nil {
		return Options{}, prefix(root, err)
	}
	return o, nil
}

// DecodeModelOptions decodes a JSON object into ModelOptions, strictly (see
// DecodeOptions): the connector and the sandbox are unknown fields here.
func DecodeModelOptions(root string, data []byte) (ModelOptions, error) {
	var o ModelOptions
	if err := decodeStrict(root, data, &o); err != nil {
		return ModelOptions{}, err
	}
	if err := o.Check(); err != nil {
		return ModelOptions{}, prefix(root, err)
	}
	return o, nil
}

func prefix(root string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Path: join(root, fe.Path), Problem: fe.Problem}
	}
	return err
}

// decodeStrict decodes data into v (a pointer to a struct), walking
// objects member by member so that every problem names its field.
func decodeStrict(root string, data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		return &FieldError{Path: root, Problem: "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	return decodeValue(root, data, reflect.ValueOf(v).Elem())
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func decodeValue(path string, data []byte, rv reflect.Value) error {
	kind := jsonKind(data)
	if kind == "null" {
		return nil
	}
	t := rv.Type()
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && !t.Implements(unmarshalerType) {
		if rv.IsNil() {
			rv.Set(reflect.New(t.Elem()))
		}
		return decodeValue(path, data, rv.Elem())
	}
	if t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerType) {
		if kind != "an object" {
			return &FieldError{Path: path, Problem: "want an object, got " + kind}
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(data, &members); err != nil {
			return &FieldError{Path: path, Problem: err.Error()}
		}
		fields := fieldsOf(t)
		for _, name := range slices.Sorted(maps.Keys(members)) {
			idx, ok := fields.byName[name]
			if !ok {
				msg := "known: " + strings.Join(fields.names, ", ")
				if best := hint.Closest(name, fields.names); best != "" {
					msg = fmt.Sprintf("did you mean %q?", best)
				}
				if h, ok := rv.Addr().Interface().(interface{ unknownFieldHint(string) string }); ok {
					msg = h.unknownFieldHint(name)
				}
				return &FieldError{Path: join(path, name), Problem: "unknown field (" + msg + ")"}
			}
			if err := decodeValue(join(path, name), members[name], rv.FieldByIndex(idx)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := json.Unmarshal(data, rv.Addr().Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &FieldError{Path: join(path, te.Field), Problem: "want " + want(t) + ", got " + got(te.Value)}
		}
		return &FieldError{Path: path, Problem: strings.TrimPrefix(err.Error(), "json: ")}
	}
	return nil
}

// want describes what a Go type takes, for problems.
func want(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.Float64 {
			return "an object of numbers"
		}
		return "an object"
	}
	return t.String()
}

// got describes the JSON value an *json.UnmarshalTypeError reports.
func got(value string) string {
	switch value {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "number":
		return "a number"
	}
	return strings.TrimPrefix(value, "number ")
}

// jsonKind names the kind of a JSON value by its first byte, for problems.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func join(path, name string) string {
	switch {
	case path == "":
		return name
	case name == "":
		return path
	}
	return path + "." + name
}

// structFields maps a struct's JSON names (those of embedded structs
// included) to field indexes.
type structFields struct {
	byName map[string][]int
	names  []string // sorted
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if v, ok := fieldCache.Load(t); ok {
		return v.(*structFields)
	}
	sf := &structFields{byName: map[string][]int{}}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		sf.byName[name] = f.Index
		sf.names = append(sf.names, name)
	}
	slices.Sort(sf.names)
	fieldCache.Store(t, sf)
	return sf
}

// OptionNames lists the JSON names of Options' fields (model options
// included), sorted: what a hook may return.
func OptionNames() []string { return slices.Clone(fieldsOf(reflect.TypeFor[Options]()).names) }

// Check reports a model option of the wrong kind (see ModelOptions.Check).
func (o Options) Check() error { return o.ModelOptions.Check() }
