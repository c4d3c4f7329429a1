package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIDescribesTheRoutes: /openapi.json is an OpenAPI 3.1 document
// that describes exactly the routes the server registers, with their
// methods, path parameters and whether they take a token.
func TestOpenAPIDescribesTheRoutes(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	s, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, fb, nil)
	resp, body := do(t, ts, "GET", "/openapi.json", "", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI  string                                `json:"openapi"`
		Security []map[string][]string                 `json:"security"`
		Paths    map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || len(doc.Security) != 1 {
		t.Errorf("openapi %q, security %v", doc.OpenAPI, doc.Security)
	}
	described := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			key := strings.ToUpper(method) + " " + path
			described[key] = true
			var op struct {
				Security   *[]any `json:"security"`
				Parameters []struct {
					Name string `json:"name"`
					In   string `json:"in"`
				} `json:"parameters"`
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			// Every {param} of the path is described.
			for _, seg := range strings.Split(path, "/") {
				if name, ok := strings.CutPrefix(seg, "{"); ok {
					name = strings.TrimSuffix(name, "}")
					if !slices.ContainsFunc(op.Parameters, func(p struct {
						Name string `json:"name"`
						In   string `json:"in"`
					}) bool {
						return p.Name == name && p.In == "path"
					}) {
						t.Errorf("%s does not describe its path parameter %s", key, name)
					}
				}
			}
			if !slices.ContainsFunc([]string{"200", "202"}, func(c string) bool { _, ok := op.Responses[c]; return ok }) {
				t.Errorf("%s describes no 200 or 202 answer", key)
			}
			// Public: no user's token (no security, or another scheme
			// such as the operator's metrics token).
			public := op.Security != nil && !strings.Contains(fmt.Sprint(*op.Security), "bearer:")
			for _, r := range s.Routes() {
				if r.Method+" "+r.Path == key && r.Public != public {
					t.Errorf("%s: public %v in the server, %v in the description", key, r.Public, public)
				}
			}
			if op.Security == nil || len(*op.Security) > 0 {
				if _, ok := op.Responses["401"]; !ok {
					t.Errorf("%s takes a token but describes no 401", key)
				}
			}
		}
	}
	for _, r := range s.Routes() {
		key := r.Method + " " + r.Path
		if !described[key] {
			t.Errorf("the server registers %s, which /openapi.json does not describe", key)
		}
		delete(described, key)
	}
	for key := range described {
		t.Errorf("/openapi.json describes %s, which the server does not register", key)
	}
	if len(s.Routes()) < 10 {
		t.Errorf("only %d routes", len(s.Routes()))
	}
}
