package main

// This file holds the fast reading of a client's message: the members
// routing needs, read straight from the raw JSON, the rest kept as the
// bytes it came in, with nothing decoded twice. Each reader handles the
// plain forms clients send (exact member names, strings without escapes)
// and reports false for anything else, which its caller then decodes with
// encoding/json as before: the result is always what encoding/json gives.

import (
	"bytes"
	"encoding/json"
)

// scanMessage reads data, a client's message, into msg as
// json.Unmarshal(data, msg) would, and reports whether it could: data must
// be valid JSON, an object, whose members of wireMsg's are spelt exactly,
// with "jsonrpc" and "method" strings without escapes (or null) and no
// "error". Params, result and ID are slices of data.
func scanMessage(data []byte, msg *wireMsg) bool {
	if len(data) == 0 || data[0] != '{' || !json.Valid(data) {
		return false
	}
	ok := true
	rawMembers(data, func(key, value []byte) {
		switch string(key) {
		case "jsonrpc":
			ok = ok && plainString(value, &msg.JSONRPC)
		case "method":
			ok = ok && plainMethod(value, &msg.Method)
		case "id":
			msg.ID = json.RawMessage(value)
		case "params":
			msg.Params = json.RawMessage(value)
		case "result":
			msg.Result = json.RawMessage(value)
		default:
			// "error", a name encoding/json would match whatever its case,
			// or one with an escape: decoded the slow way.
			ok = ok && !foldsTo(key, "jsonrpc", "method", "id", "params", "result", "error")
		}
	})
	return ok
}

// routing is what a forwarded request's params say about where it goes
// (see Gateway.route).
type routing struct {
	Name string `json:"name"`
	URI  string `json:"uri"`
	Ref  struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"ref"`
	Meta struct {
		Token json.RawMessage `json:"progressToken"`
	} `json:"_meta"`
}

// scanRouting reads params, valid JSON, into p as json.Unmarshal(params,
// p) would, and reports whether it could: params must be an object with
// "name" and "uri" strings without escapes (or null), no "ref", and a
// "_meta" that is an object (or null) whose "progressToken" is spelt
// exactly.
func scanRouting(params []byte, p *routing) bool {
	if len(params) == 0 || params[0] != '{' {
		return false
	}
	ok := true
	rawMembers(params, func(key, value []byte) {
		switch string(key) {
		case "name":
			ok = ok && plainString(value, &p.Name)
		case "uri":
			ok = ok && plainString(value, &p.URI)
		case "_meta":
			ok = ok && scanToken(value, &p.Meta.Token)
		default:
			ok = ok && !foldsTo(key, "name", "uri", "ref", "_meta")
		}
	})
	return ok
}

// scanToken reads the progressToken of meta, a _meta value, into token.
func scanToken(meta []byte, token *json.RawMessage) bool {
	if string(meta) == "null" {
		return true
	}
	if len(meta) == 0 || meta[0] != '{' {
		return false
	}
	ok := true
	rawMembers(meta, func(key, value []byte) {
		switch {
		case string(key) == "progressToken":
			*token = json.RawMessage(value)
		case foldsTo(key, "progressToken"):
			ok = false
		}
	})
	return ok
}

// plainMethod is plainString for a method's name: the table's names are
// not copied.
func plainMethod(value []byte, s *string) bool {
	if len(value) >= 2 && value[0] == '"' {
		if name, ok := methodNames[string(value[1:len(value)-1])]; ok {
			*s = name
			return true
		}
	}
	return plainString(value, s)
}

// methodNames holds the names of the table's methods, each as its own
// value. It is never changed.
var methodNames = func() map[string]string {
	m := make(map[string]string, len(methods))
	for name := range methods {
		m[name] = name
	}
	return m
}()

// foldsTo reports whether key, a member name as written, might be taken
// for one of names by encoding/json, which matches names whatever their
// case, and after unescaping.
func foldsTo(key []byte, names ...string) bool {
	if bytes.IndexByte(key, '\\') >= 0 {
		return true
	}
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}
