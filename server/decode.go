package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/units"
)

// bodyReadTimeout bounds how long a client may take to send its body, so a
// slow sender cannot hold a handler forever. It is set per request (not
// as http.Server.ReadTimeout, whose deadline would also end long
// streaming responses).
const bodyReadTimeout = 30 * time.Second

// readBody reads the whole request body, at most the server's body limit
// (bodyLimit). A body must be JSON and say so (Content-Type:
// application/json): a web page of another site can send text/plain,
// form or multipart bodies without the browser asking this server first,
// never JSON.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit, setting := s.bodyLimit()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			what := "the request body"
			if r.ContentLength > 0 {
				what = fmt.Sprintf("the request body of %s", units.FormatBytes(r.ContentLength))
			}
			return nil, chat.Errorf(CodeBodyTooLarge,
				"%s is over the limit of %s (%d bytes); images count as base64, 4/3 of their size: send fewer or smaller images, or raise %s",
				what, units.FormatBytes(limit), limit, setting)
		}
		return nil, badRequest("read request body: %v", err)
	}
	if ct := r.Header.Get("Content-Type"); len(bytes.TrimSpace(b)) > 0 && !jsonContentType(ct) {
		what := "a body without Content-Type"
		if ct != "" {
			what = fmt.Sprintf("Content-Type %q", ct)
		}
		return nil, errorf(http.StatusUnsupportedMediaType, chat.ErrInvalidRequest,
			"%s is not accepted: send the JSON body with Content-Type: application/json (curl: --json, or -H 'Content-Type: application/json')", what)
	}
	return b, nil
}

// decodeJSON decodes body into v. With strict, unknown fields are errors.
// Errors say what was wrong and where (line:column).
func decodeJSON(body []byte, v any, strict bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("request body is empty: send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(body, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := position(body, dec.InputOffset())
		return badRequest("invalid JSON at line %d, column %d: unexpected data after the JSON object", line, col)
	}
	return nil
}

func jsonError(body []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(body, se.Offset)
		return badRequest("invalid JSON at line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(body, int64(len(body)))
		return badRequest("invalid JSON at line %d, column %d: unexpected end of input", line, col)
	case errors.As(err, &te):
		line, col := position(body, te.Offset)
		field := te.Field
		if field == "" {
			return badRequest("invalid JSON at line %d, column %d: expected %s, got %s", line, col, te.Type, te.Value)
		}
		e := badRequest("invalid JSON at line %d, column %d: field %q must be %s, got %s", line, col, field, jsonKind(te.Type.String()), te.Value)
		e.Err = &chat.FieldError{Path: field, Problem: "must be " + jsonKind(te.Type.String())} // the error's param
		return e
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return badRequest("invalid request: %s", msg)
	}
	return badRequest("invalid JSON: %s", msg)
}

// jsonKind names a Go type the way a JSON author thinks of it.
func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"), strings.HasPrefix(goType, "uint"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "struct"), strings.Contains(goType, "."):
		return "an object"
	}
	return fmt.Sprintf("of type %s", goType)
}

// position converts a byte offset into a 1-based line and column.
func position(b []byte, off int64) (line, col int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	if off < 0 {
		off = 0
	}
	prefix := b[:off]
	line = bytes.Count(prefix, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(prefix, '\n') + 1)
	if col == 0 {
		col = 1
	}
	return line, col
}

// bodyLimit is the most a request body may hold and the setting that says
// so: Config.BodyLimit when set, else the app's limits.request_body.
func (s *Server) bodyLimit() (int64, string) {
	if s.cfg.BodyLimit > 0 {
		return s.cfg.BodyLimit, "the server's body limit"
	}
	l := assistant.DefaultLimits()
	if app := s.cfg.Backend.App(); app != nil {
		l = app.Config.Limits.WithDefaults()
	}
	return l.RequestBody, `app.jsonc's limits.request_body (like "limits": {"request_body": "64m"})`
}
