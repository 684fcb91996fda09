package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// JSON-RPC 2.0 messages as corral reads and writes them on a connection: the
// wire form of one message, what makes an ID valid, and the encoding of
// requests, notifications and error responses. The mux and the connections
// both use it; it calls nothing above it.

// wireMsg is one JSON-RPC message, decoded only as far as routing needs: the
// params, result and error data stay raw JSON and are passed on as they are.
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

// wireError is a JSON-RPC error object. It is also the Go error corral
// returns wherever the error is meant for a client as it is.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	// refusedBy, never sent, names the server of an item the client asked
	// for that is outside its view: the answer is that of an unknown item,
	// and the audit trail says what it was (see offer.itemByName).
	refusedBy string
}

func (e *wireError) Error() string { return e.Message }

// validID reports whether raw, the JSON of a message's "id" member, is an ID
// MCP allows: a string, or an integer written without fraction or exponent
// (so not 1.5, 1e2 or 1e999), in valid UTF-8. It is the one check of a
// client's ID: an answer echoes the ID as it came, so it must be valid JSON.
func validID(raw []byte) bool {
	if len(raw) == 0 || !utf8.Valid(raw) {
		return false
	}
	if raw[0] == '"' {
		return json.Valid(raw)
	}
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || digits[0] == '0' && len(digits) > 1 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func unavailable(format string, args ...any) *wireError {
	return &wireError{Code: codeUnavailable, Message: fmt.Sprintf(format, args...)}
}

// decodeServerLine decodes a line from a server. Params and Result are
// slices of line itself, not copies: a server's answer may be tens of
// megabytes, and is passed on to the client from the line it arrived in.
// The line is validated as a whole first.
func decodeServerLine(line []byte) (*wireMsg, error) {
	if !json.Valid(line) {
		return nil, errors.New("invalid JSON")
	}
	var msg wireMsg
	var err error
	rawMembers(line, func(key, value []byte) {
		if err != nil {
			return
		}
		switch string(key) {
		case "jsonrpc":
			if !plainString(value, &msg.JSONRPC) {
				err = json.Unmarshal(value, &msg.JSONRPC)
			}
		case "id":
			msg.ID = json.RawMessage(value)
		case "method":
			if !plainString(value, &msg.Method) {
				err = json.Unmarshal(value, &msg.Method)
			}
		case "params":
			msg.Params = json.RawMessage(value)
		case "result":
			msg.Result = json.RawMessage(value)
		case "error":
			msg.Error = new(wireError)
			err = json.Unmarshal(value, msg.Error)
		}
	})
	if err != nil {
		return nil, err
	}
	if string(msg.ID) == "null" {
		msg.ID = nil
	}
	return &msg, nil
}

// encodeRequest returns a request line, with its newline, for the server.
// The params are made compact: a newline inside would end the line.
func encodeRequest(id int64, method string, params json.RawMessage) ([]byte, error) {
	return appendRequest(make([]byte, 0, len(params)+len(method)+64), id, method, params)
}

// appendRequest appends the request line encodeRequest returns to b.
func appendRequest(b []byte, id int64, method string, params json.RawMessage) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	return appendMethodParams(b, method, params)
}

// encodeNotification returns a notification line, with its newline.
func encodeNotification(method string, params json.RawMessage) ([]byte, error) {
	b := make([]byte, 0, len(params)+len(method)+64)
	b = append(b, `{"jsonrpc":"2.0"`...)
	return appendMethodParams(b, method, params)
}

func appendMethodParams(b []byte, method string, params json.RawMessage) ([]byte, error) {
	b = append(b, `,"method":`...)
	b = strconv.AppendQuote(b, method) // methods are ASCII names chosen by corral
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		if bytes.ContainsAny(params, "\r\n") {
			var buf bytes.Buffer
			if err := json.Compact(&buf, params); err != nil {
				return nil, &wireError{Code: codeInvalidParams, Message: "params are not valid JSON: " + err.Error()}
			}
			params = buf.Bytes()
		}
		b = append(b, params...)
	}
	return append(b, "}\n"...), nil
}

// encodeErrorResponse returns an error message for id (null if empty),
// without a newline.
func encodeErrorResponse(id json.RawMessage, e *wireError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	eb, _ := json.Marshal(e)
	b := make([]byte, 0, len(id)+len(eb)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":`...)
	b = append(b, eb...)
	return append(b, '}')
}

// sentID returns the ID raw, an ID corral sent to a server (a decimal
// int64, see mux.CallFor), and whether raw is one: what strconv.ParseInt
// does, without making a string of raw.
func sentID(raw []byte) (int64, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > math.MaxInt64 {
		return 0, false // a negative ID is never one corral sent, so -2^63 need not parse
	}
	if len(digits) < len(raw) {
		return -int64(n), true
	}
	return int64(n), true
}

// truncate returns at most n bytes of b as a string, for logs.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// reply is an answer for a client. A server's result stays the slice of the

// line it arrived in and is written out after head, never copied into one
// buffer with it: a result may be tens of megabytes.
type reply struct {
	head   []byte // the message up to its result, or the whole message
	result []byte // if not nil, written after head and followed by "}"
	code   int    // the error code of an error answer
	small  [48]byte
}

// resultReply returns the answer to request id with a result.
func resultReply(id, result json.RawMessage) *reply {
	r := &reply{result: result}
	head := r.small[:0] // one allocation for a short ID, not two
	head = append(head, `{"jsonrpc":"2.0","id":`...)
	head = append(head, id...)
	r.head = append(head, `,"result":`...)
	return r
}

// errorReply returns the answer to request id (null if empty) with an error.
func errorReply(id json.RawMessage, e *wireError) *reply {
	return &reply{head: encodeErrorResponse(id, e), code: e.Code}
}

// len returns the number of bytes WriteTo writes.
func (r *reply) len() int {
	if r.result == nil {
		return len(r.head)
	}
	return len(r.head) + len(r.result) + 1
}

// WriteTo writes the message to w, without a newline.
func (r *reply) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r.head)
	if err != nil || r.result == nil {
		return int64(n), err
	}
	m, err := w.Write(r.result)
	n += m
	if err != nil {
		return int64(n), err
	}
	m, err = io.WriteString(w, "}") // no allocation where w has WriteString
	return int64(n + m), err
}
