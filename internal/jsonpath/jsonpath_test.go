package jsonpath

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestGet(t *testing.T) {
	t.Parallel()
	var data any
	if err := json.Unmarshal([]byte(`{"a": {"b": [{"c": 1}, {"c": 2, "d": [true]}]}, "wheres": [{"like": "%x%"}], "k.e.y": 3}`), &data); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want any
	}{
		{"$.a.b[1].c", 2.0},
		{"a.b[0].c", 1.0},
		{"a.b[1].d[0]", true},
		{"wheres[0].like", "%x%"},
		{"$.a", map[string]any{"b": []any{map[string]any{"c": 1.0}, map[string]any{"c": 2.0, "d": []any{true}}}}},
		{"", data},
		{"$", data},
		{"a.b[2]", nil},
		{"a.b[-1]", nil},
		{"a.b[x]", nil},
		{"a.b.c", nil},
		{"missing.deeper", nil},
		{"a.b[0", nil},
	}
	for _, tt := range tests {
		if got := Get(data, tt.path); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Get(%q) = %#v, want %#v", tt.path, got, tt.want)
		}
	}
}

func TestSegments(t *testing.T) {
	t.Parallel()
	got := Segments("a.b[0].c[12]..d")
	want := []string{"a", "b", "[0]", "c", "[12]", "d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Segments = %q, want %q", got, want)
	}
}

func FuzzGet(f *testing.F) {
	for _, p := range []string{"$.a.b[0]", "a[", "[1][2]", "..", "a.b[99999999999999999999]"} {
		f.Add(p)
	}
	data := map[string]any{"a": map[string]any{"b": []any{1.0, []any{2.0}}}}
	f.Fuzz(func(t *testing.T, path string) {
		_ = Get(data, path) // must not panic
	})
}
