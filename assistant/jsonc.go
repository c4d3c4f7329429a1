package assistant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tailscale/hujson"
)

// Limits on configuration files, so a stray huge or pathological file is a
// clear problem rather than a slow load or a deep recursion.
const (
	maxConfigFile = 1 << 20
	maxDepth      = 100
)

// doc is one JSONC file being decoded: problems are collected rather than
// returned one at a time, and the offset of every decoded value is kept by
// its field path ("sandbox.arguments.max_turns", "mcp.servers[0]") so that
// later validation can point at it.
type doc struct {
	file string // relative to the app root, for problems
	src  []byte
	pos  map[string]int
	// keys holds the offset of each object member's key by its path.
	keys  map[string]int
	probs []Problem
	// broken is set when the file could not be parsed at all: later
	// validation would only add noise.
	broken bool
	// bad holds the paths whose values had the wrong type, so range checks
	// do not also complain about the zero value left there.
	bad map[string]bool
	// lenient is above zero while a field tagged yao:"lenient" is decoded: a
	// value of the wrong type there is dropped with a warning, the way Yao
	// drops it, instead of failing the file.
	lenient int
}

// warnAt records a warning at byte offset off.
func (d *doc) warnAt(off int, format string, args ...any) {
	line, col := lineCol(d.src, off)
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...), Severity: SeverityWarning})
}

// warnPath records a warning at the value of path (see errPath).
func (d *doc) warnPath(path string, format string, args ...any) {
	d.warnAt(d.offset(path), format, args...)
}

// keyOffset returns the offset of the key of path's member (the value's
// offset when the key is unknown): warnings about a whole field point at
// its name.
func (d *doc) keyOffset(path string) int {
	if off, ok := d.keys[path]; ok {
		return off
	}
	return d.offset(path)
}

// errors reports whether the doc has error problems (warnings do not
// count).
func (d *doc) errors() bool { return hasErrors(d.probs) }

// errAt records a problem at byte offset off.
func (d *doc) errAt(off int, format string, args ...any) {
	line, col := lineCol(d.src, off)
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

// errPath records a problem at the value of path, or at its nearest
// enclosing value present in the file when path itself is absent.
func (d *doc) errPath(path string, format string, args ...any) {
	d.errAt(d.offset(path), format, args...)
}

// has reports whether path was present in the file with a value of the
// right type.
func (d *doc) has(path string) bool {
	_, ok := d.pos[path]
	return ok && !d.bad[path]
}

// typeErr records a problem with the value at path and marks the path bad.
// Inside a lenient field the problem is a warning that says the value is
// ignored.
func (d *doc) typeErr(off int, path, format string, args ...any) {
	d.bad[path] = true
	if d.lenient > 0 {
		d.warnAt(off, format+"; ignored, as Yao ignores it", args...)
		return
	}
	d.errAt(off, format, args...)
}

func (d *doc) offset(path string) int {
	for {
		if off, ok := d.pos[path]; ok {
			return off
		}
		if path == "" {
			return 0
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			path = ""
		} else {
			path = path[:i]
		}
	}
}

// hujsonPos matches the position hujson puts in its syntax errors.
var hujsonPos = regexp.MustCompile(`^hujson: line (\d+), column (\d+): (.*)$`)

// decodeJSONC parses src as JSONC (JSON with comments and trailing commas)
// and decodes it strictly into v (a pointer to a struct with json tags):
// unknown fields, duplicate fields and wrong types are problems positioned
// in the original text. Decoding walks hujson's syntax tree, whose offsets
// are those of the original file, so it goes on after a bad field and
// reports every problem in the file, not just the first.
//
// Supported targets: structs, pointers, map[string]T, slices, strings,
// bools, integers, float64, any (objects become map[string]any, numbers
// float64) and types that implement json.Unmarshaler. A JSON null leaves
// the target at its zero value.
func decodeJSONC(file string, src []byte, v any) *doc {
	d := &doc{file: file, src: src, pos: map[string]int{}, keys: map[string]int{}, bad: map[string]bool{}, broken: true}
	if len(src) > maxConfigFile {
		d.errAt(0, "file is %d bytes; the limit for a configuration file is %d", len(src), maxConfigFile)
		return d
	}
	if len(bytes.TrimSpace(src)) == 0 {
		d.errAt(0, "file is empty: want a JSON object")
		return d
	}
	if off := tooDeep(src); off >= 0 {
		d.errAt(off, "nesting is deeper than %d levels", maxDepth)
		return d
	}
	root, err := hujson.Parse(src)
	if err != nil {
		msg := err.Error()
		if m := hujsonPos.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			col, _ := strconv.Atoi(m[2])
			d.probs = append(d.probs, Problem{File: file, Line: line, Col: col, Msg: "syntax error: " + syntaxMsg(m[3])})
		} else {
			d.errAt(0, "syntax error: %s", syntaxMsg(strings.TrimPrefix(msg, "hujson: ")))
		}
		return d
	}
	d.broken = false
	if strings.HasSuffix(file, ".json") && !root.IsStandard() {
		// Yao reads .json files as strict JSON (YAO-FORMATS.md §0).
		d.warnAt(0, "comments or trailing commas in a .json file: Yao reads .json strictly and would not load it; rename the file to .jsonc or .yao")
	}
	d.decode(&root, reflect.ValueOf(v).Elem(), "")
	return d
}

// syntaxMsg rewords hujson's end-of-input errors for people.
func syntaxMsg(m string) string {
	if strings.HasSuffix(m, "unexpected EOF") {
		return "unexpected end of file (a missing } or ], or an unclosed string?)"
	}
	return m
}

// tooDeep returns the offset where nesting exceeds maxDepth, or -1. It
// skips strings and comments the way the JSONC grammar does.
func tooDeep(b []byte) int {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '/':
			if i+1 < len(b) && b[i+1] == '/' {
				for i < len(b) && b[i] != '\n' {
					i++
				}
			} else if i+1 < len(b) && b[i+1] == '*' {
				end := bytes.Index(b[i+2:], []byte("*/"))
				if end < 0 {
					return -1
				}
				i += end + 3
			}
		case '{', '[':
			depth++
			if depth > maxDepth {
				return i
			}
		case '}', ']':
			depth--
		}
	}
	return -1
}

func (d *doc) decode(v *hujson.Value, rv reflect.Value, path string) {
	d.pos[path] = v.StartOffset
	if lit, ok := v.Value.(hujson.Literal); ok && lit.Kind() == 'n' {
		return // null: leave the zero value
	}
	if u, ok := rv.Addr().Interface().(json.Unmarshaler); ok {
		// A type that decodes itself (json.RawMessage, chat.Stop) gets
		// the value as standard JSON.
		c := v.Clone()
		c.Standardize()
		if err := u.UnmarshalJSON(c.Pack()); err != nil {
			d.typeErr(v.StartOffset, path, "%s: %s", label(path), strings.TrimPrefix(err.Error(), "json: "))
		}
		return
	}
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		d.decode(v, rv.Elem(), path)
	case reflect.Interface:
		if g, ok := d.generic(v, path); ok {
			rv.Set(reflect.ValueOf(g))
		}
	case reflect.Struct:
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			d.wrongType(v, rv.Type(), path)
			return
		}
		info := fieldsOf(rv.Type())
		seen := map[string]bool{}
		for i := range obj.Members {
			m := &obj.Members[i]
			name := m.Name.Value.(hujson.Literal).String()
			sub := join(path, name)
			if seen[name] {
				d.errAt(m.Name.StartOffset, "duplicate field %q%s", name, in(path))
				continue
			}
			seen[name] = true
			d.keys[sub] = m.Name.StartOffset
			idx, ok := info.byName[name]
			if !ok {
				hint := suggest(name, info.names)
				if h, ok := rv.Addr().Interface().(fieldHinter); ok && h.fieldHint(name) != "" {
					hint = " (" + h.fieldHint(name) + ")"
				}
				d.errAt(m.Name.StartOffset, "unknown field %q%s%s", name, in(path), hint)
				continue
			}
			if info.lenient[idx] {
				d.lenient++
				d.decode(&m.Value, rv.Field(idx), sub)
				d.lenient--
				continue
			}
			d.decode(&m.Value, rv.Field(idx), sub)
		}
	case reflect.Map:
		obj, ok := v.Value.(*hujson.Object)
		if !ok || rv.Type().Key().Kind() != reflect.String {
			d.wrongType(v, rv.Type(), path)
			return
		}
		if rv.IsNil() {
			rv.Set(reflect.MakeMapWithSize(rv.Type(), len(obj.Members)))
		}
		seen := map[string]bool{}
		for i := range obj.Members {
			m := &obj.Members[i]
			name := m.Name.Value.(hujson.Literal).String()
			if seen[name] {
				d.errAt(m.Name.StartOffset, "duplicate key %q%s", name, in(path))
				continue
			}
			seen[name] = true
			ev := reflect.New(rv.Type().Elem()).Elem()
			d.decode(&m.Value, ev, join(path, name))
			rv.SetMapIndex(reflect.ValueOf(name).Convert(rv.Type().Key()), ev)
		}
	case reflect.Slice:
		arr, ok := v.Value.(*hujson.Array)
		if !ok {
			d.wrongType(v, rv.Type(), path)
			return
		}
		s := reflect.MakeSlice(rv.Type(), len(arr.Elements), len(arr.Elements))
		for i := range arr.Elements {
			d.decode(&arr.Elements[i], s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		rv.Set(s)
	case reflect.String:
		lit, ok := v.Value.(hujson.Literal)
		if !ok || lit.Kind() != '"' {
			d.wrongType(v, rv.Type(), path)
			return
		}
		rv.SetString(lit.String())
	case reflect.Bool:
		lit, ok := v.Value.(hujson.Literal)
		if !ok || (lit.Kind() != 't' && lit.Kind() != 'f') {
			d.wrongType(v, rv.Type(), path)
			return
		}
		rv.SetBool(lit.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lit, ok := v.Value.(hujson.Literal)
		if !ok || lit.Kind() != '0' {
			d.wrongType(v, rv.Type(), path)
			return
		}
		n, err := strconv.ParseInt(string(lit), 10, 64)
		if err != nil || rv.OverflowInt(n) {
			d.typeErr(v.StartOffset, path, "%s: want an integer, got %s", label(path), lit)
			return
		}
		rv.SetInt(n)
	case reflect.Float32, reflect.Float64:
		lit, ok := v.Value.(hujson.Literal)
		if !ok || lit.Kind() != '0' {
			d.wrongType(v, rv.Type(), path)
			return
		}
		f, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			d.typeErr(v.StartOffset, path, "%s: number %s is out of range", label(path), lit)
			return
		}
		rv.SetFloat(f)
	default:
		// A programming error in the target type, not bad input.
		panic(fmt.Sprintf("assistant: cannot decode into %s", rv.Type()))
	}
}

// generic converts a JSON value to map[string]any, []any, string, float64,
// bool or nil.
func (d *doc) generic(v *hujson.Value, path string) (any, bool) {
	d.pos[path] = v.StartOffset
	switch t := v.Value.(type) {
	case hujson.Literal:
		switch t.Kind() {
		case 'n':
			return nil, true
		case 't', 'f':
			return t.Bool(), true
		case '"':
			return t.String(), true
		default:
			f, err := strconv.ParseFloat(string(t), 64)
			if err != nil {
				d.errAt(v.StartOffset, "%s: number %s is out of range", label(path), t)
				return nil, false
			}
			return f, true
		}
	case *hujson.Object:
		m := make(map[string]any, len(t.Members))
		for i := range t.Members {
			mem := &t.Members[i]
			name := mem.Name.Value.(hujson.Literal).String()
			if _, dup := m[name]; dup {
				d.errAt(mem.Name.StartOffset, "duplicate key %q%s", name, in(path))
				continue
			}
			d.keys[join(path, name)] = mem.Name.StartOffset
			if g, ok := d.generic(&mem.Value, join(path, name)); ok {
				m[name] = g
			}
		}
		return m, true
	case *hujson.Array:
		a := make([]any, 0, len(t.Elements))
		for i := range t.Elements {
			if g, ok := d.generic(&t.Elements[i], fmt.Sprintf("%s[%d]", path, i)); ok {
				a = append(a, g)
			}
		}
		return a, true
	}
	return nil, false
}

func (d *doc) wrongType(v *hujson.Value, want reflect.Type, path string) {
	d.typeErr(v.StartOffset, path, "%s: want %s, got %s", label(path), typeName(want), kindName(v))
}

func typeName(t reflect.Type) string {
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
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

func kindName(v *hujson.Value) string {
	switch v.Value.Kind() {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	case '[':
		return "a list"
	}
	return "null"
}

func label(path string) string {
	if path == "" {
		return "file"
	}
	return path
}

func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fieldHinter is implemented by targets that know where a misplaced
// field belongs.
type fieldHinter interface {
	fieldHint(name string) string
}

// structInfo maps a struct's json names to field indexes.
type structInfo struct {
	byName map[string]int
	names  []string // sorted, for hints
	// lenient marks fields tagged `json:"name" yao:"lenient"`: metadata Yao reads
	// leniently, whose wrong-typed values are dropped with a warning.
	lenient map[int]bool
}

var fieldCache sync.Map // reflect.Type -> *structInfo

func fieldsOf(t reflect.Type) *structInfo {
	if v, ok := fieldCache.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{byName: map[string]int{}, lenient: map[int]bool{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag == "-" || tag == "" {
			continue
		}
		if f.Tag.Get("yao") == "lenient" {
			info.lenient[i] = true
		}
		info.byName[tag] = i
		info.names = append(info.names, tag)
	}
	sort.Strings(info.names)
	fieldCache.Store(t, info)
	return info
}
