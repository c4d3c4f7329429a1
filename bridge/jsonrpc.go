package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file is the agent CLI's side of the in-sandbox MCP relays: stdio
// MCP is newline-delimited JSON-RPC, and the CLI gets a JSON-RPC error for
// a line that is not a message instead of a relay that ends (which would
// take the server's tools away for the rest of the run).

// MaxMCPLine bounds one JSON-RPC message line the relays read (the MCP
// SDK's own default).
const MaxMCPLine = 16 << 20

// lineWriter writes whole lines, one writer at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// line writes b and a newline in one write.
func (lw *lineWriter) line(b []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	_, err := lw.w.Write(buf)
	return err
}

// message writes msg as a line.
func (lw *lineWriter) message(msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	return lw.line(b)
}

// rpcError writes a JSON-RPC error response for id (null when the id is
// unknown).
func (lw *lineWriter) rpcError(id any, code int64, msg string) error {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	return lw.line(b)
}

// errLineTooLong is a line longer than MaxMCPLine.
var errLineTooLong = errors.New("line too long")

// readLine reads the next line of r, without its end of line. A line
// longer than max is read to its end and returned as errLineTooLong.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	long := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > max+2 {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if long {
				return nil, errLineTooLong
			}
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0 && !long:
			return bytes.TrimRight(line, "\r\n"), nil
		default:
			return nil, err
		}
	}
}

// readMessages reads the CLI's JSON-RPC lines from r and hands each
// message (or batch: a JSON array, passed on as it is) to handle. A line
// that is not JSON gets a parse error (-32700), JSON that is not a
// JSON-RPC message an invalid request error (-32600), both written to
// out, and reading goes on. It returns at the end of r (nil) or the
// first error of r or handle.
func readMessages(r io.Reader, out *lineWriter, handle func(raw []byte, msg jsonrpc.Message) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, MaxMCPLine)
		if errors.Is(err, errLineTooLong) {
			if err := out.rpcError(nil, jsonrpc.CodeParseError, fmt.Sprintf("Parse error: message longer than %d bytes", MaxMCPLine)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			if err := out.rpcError(nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON"); err != nil {
				return err
			}
			continue
		}
		if line[0] == '[' {
			if err := handle(line, nil); err != nil {
				return err
			}
			continue
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			var probe struct {
				ID any `json:"id"`
			}
			_ = json.Unmarshal(line, &probe)
			switch probe.ID.(type) {
			case string, float64:
			default:
				probe.ID = nil
			}
			if err := out.rpcError(probe.ID, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error()); err != nil {
				return err
			}
			continue
		}
		if err := handle(line, msg); err != nil {
			return err
		}
	}
}
