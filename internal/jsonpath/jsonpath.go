// Package jsonpath reads a value out of JSON-decoded data by the simple
// paths Yao's test assertions use: dotted keys with list indexes,
// optionally after "$." ("$.items[0].name", "wheres[0].like").
package jsonpath

import (
	"strconv"
	"strings"
)

// Get returns the value at path in data (maps, lists and scalars as
// encoding/json decodes them), nil when the path does not lead to one.
func Get(data any, path string) any {
	path = strings.TrimPrefix(strings.TrimPrefix(path, "$"), ".")
	cur := data
	for _, seg := range Segments(path) {
		if len(seg) >= 2 && seg[0] == '[' && seg[len(seg)-1] == ']' {
			i, err := strconv.Atoi(seg[1 : len(seg)-1])
			list, ok := cur.([]any)
			if err != nil || !ok || i < 0 || i >= len(list) {
				return nil
			}
			cur = list[i]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[seg]
	}
	return cur
}

// Segments splits a path into keys and "[N]" indexes: "a.b[0].c" is a, b,
// [0], c. An unclosed bracket is kept as part of a key.
func Segments(path string) []string {
	var segs []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			segs = append(segs, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '.':
			flush()
		case '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				cur.WriteString(path[i:])
				i = len(path)
				continue
			}
			flush()
			segs = append(segs, path[i:i+j+1])
			i += j
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return segs
}
