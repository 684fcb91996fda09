package main

// Parameter headers (MCP 2026-07-28, SEP-2243). A tool may mark arguments
// of its inputSchema with "x-mcp-header": "Name", and a client calling it
// over Streamable HTTP then repeats each such argument in an
// Mcp-Param-Name header, so that load balancers and proxies can route on
// it without reading the body. This file is the one place that reads the
// annotations (toolParamHeaders): the catalog drops a tool whose
// annotations break the rules (the specification: "Clients using the
// Streamable HTTP transport MUST reject tool definitions where any
// x-mcp-header value violates these constraints. Rejection means the
// client MUST exclude the invalid tool from the result of tools/list"),
// the HTTP front end checks a modern client's headers against its
// arguments (checkParamHeaders), and a remote 2026-07-28 server gets the
// headers of the arguments corral sends it (paramHeaderValues). A tool's
// name is no part of its annotations: a tool renamed (a prefix, a
// collision, an override) keeps them, and only a change to its inputSchema
// needs them read again, with toolParamHeaders, on the schema as changed.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// paramHeaderPrefix starts the name of every parameter header.
const paramHeaderPrefix = "Mcp-Param-"

// xMCPHeader is the schema keyword that marks an argument for a header.
const xMCPHeader = "x-mcp-header"

// maxSafeInteger is 2^53-1: "Integer values MUST be within the safe range
// for JavaScript (−2^53+1 to 2^53−1)".
const maxSafeInteger = 1<<53 - 1

// paramHeader is one x-mcp-header annotation: the header Mcp-Param-{name}
// carries the argument at path (a chain of properties from the schema's
// root), of type typ ("string", "integer" or "boolean").
type paramHeader struct {
	name string
	path []string
	typ  string
}

// header returns the header's full name.
func (h paramHeader) header() string { return paramHeaderPrefix + h.name }

// toolParamHeaders returns the x-mcp-header annotations of tool, a tool as
// tools/list has it, or the error that makes the tool invalid, saying
// where and why. A tool whose JSON does not hold the text "x-mcp-header"
// is not decoded: it has none. It is safe for concurrent use.
func toolParamHeaders(tool json.RawMessage) ([]paramHeader, error) {
	if !bytes.Contains(tool, []byte(xMCPHeader)) {
		return nil, nil
	}
	var t struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if json.Unmarshal(tool, &t) != nil || len(t.InputSchema) == 0 {
		return nil, nil
	}
	var schema any
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
		return nil, nil
	}
	var out []paramHeader
	seen := map[string]string{} // lower-case name -> the path that has it
	if err := walkSchema(schema, true, nil, &out, seen); err != nil {
		return nil, err
	}
	return out, nil
}

// dataKeywords hold values, not schemas: an "x-mcp-header" inside them is
// data.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// walkSchema checks schema, found at path; reachable says it is the root or
// reached from it through "properties" alone ("reachable via a chain
// consisting solely of properties keys. The chain MUST NOT pass through
// items (or any other array keyword), composition keywords (oneOf, anyOf,
// allOf, not), conditional keywords (if/then/else), or $ref").
func walkSchema(schema any, reachable bool, path []string, out *[]paramHeader, seen map[string]string) error {
	switch s := schema.(type) {
	case []any:
		for _, e := range s {
			if err := walkSchema(e, false, path, out, seen); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if raw, ok := s[xMCPHeader]; ok {
			if err := annotation(s, raw, reachable && len(path) > 0, path, out, seen); err != nil {
				return err
			}
		}
		for key, v := range s {
			switch {
			case key == xMCPHeader || dataKeywords[key]:
			case key == "properties":
				props, _ := v.(map[string]any)
				for name, sub := range props {
					if err := walkSchema(sub, reachable, append(path[:len(path):len(path)], name), out, seen); err != nil {
						return err
					}
				}
			default:
				var err error
				if m, ok := v.(map[string]any); ok && (key == "patternProperties" || key == "$defs" || key == "definitions" || key == "dependentSchemas") {
					for _, sub := range m {
						if err = walkSchema(sub, false, path, out, seen); err != nil {
							break
						}
					}
				} else {
					err = walkSchema(v, false, path, out, seen)
				}
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// annotation checks one x-mcp-header, raw, of the property schema s at
// path, and adds it to out.
func annotation(s map[string]any, raw any, reachable bool, path []string, out *[]paramHeader, seen map[string]string) error {
	where := "the schema's root"
	if len(path) > 0 {
		where = "property " + strings.Join(path, ".")
	}
	if !reachable {
		return fmt.Errorf("x-mcp-header at %s is not on a chain of \"properties\" from the schema's root (it may not be under items, oneOf, anyOf, allOf, not, if/then/else or $ref)", where)
	}
	name, ok := raw.(string)
	if !ok || name == "" {
		return fmt.Errorf("x-mcp-header of %s must be a non-empty string", where)
	}
	for i := 0; i < len(name); i++ {
		if !isTchar(name[i]) {
			return fmt.Errorf("x-mcp-header %q of %s is not an HTTP field-name token (letters, digits and !#$%%&'*+-.^_`|~ only)", name, where)
		}
	}
	typ, _ := s["type"].(string)
	if typ != "string" && typ != "integer" && typ != "boolean" {
		return fmt.Errorf("x-mcp-header %q is on %s, whose type is not string, integer or boolean (number is not allowed)", name, where)
	}
	lower := strings.ToLower(name)
	if other, dup := seen[lower]; dup {
		return fmt.Errorf("x-mcp-header %q of %s is also the header of property %s (names are compared case-insensitively)", name, where, other)
	}
	seen[lower] = strings.Join(path, ".")
	*out = append(*out, paramHeader{name: name, path: append([]string(nil), path...), typ: typ})
	return nil
}

// isTchar reports whether c is a tchar of RFC 9110's token.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// invalidToolLine says that tool of server is left out of the lists for
// err, an error of toolParamHeaders, and what fixes it.
func invalidToolLine(server, tool string, err error) string {
	return fmt.Sprintf("tool %q of server %q is left out of tools/list: %v; the server's inputSchema must be fixed (MCP 2026-07-28, tools: x-mcp-header), or the tool hidden with the server's \"tools\" filter to silence this", tool, server, err)
}

// argumentAt returns the value at path in arguments, a JSON object, or nil
// if there is none or it is null: "If no value is present at that path in
// the call arguments, the header is omitted."
func argumentAt(arguments json.RawMessage, path []string) json.RawMessage {
	cur := arguments
	for _, key := range path {
		var next json.RawMessage
		members(cur, func(k string, v []byte) {
			if k == key {
				next = v
			}
		})
		if next == nil {
			return nil
		}
		cur = next
	}
	if string(bytes.TrimSpace(cur)) == "null" {
		return nil
	}
	return cur
}

// headerText returns the header text of value, an argument of type typ
// (before encoding), and whether it has one. "string: Use the value as-is;
// integer: Convert to decimal string representation; boolean: Convert to
// lowercase true or false."
func headerText(value json.RawMessage, typ string) (string, bool) {
	var v any
	if json.Unmarshal(value, &v) != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, typ == "string"
	case bool:
		return strconv.FormatBool(x), typ == "boolean"
	case float64:
		if typ != "integer" || x != math.Trunc(x) || math.Abs(x) > maxSafeInteger {
			return "", false
		}
		return strconv.FormatInt(int64(x), 10), true
	}
	return "", false
}

// paramHeaderValues returns the Mcp-Param headers of a call, with
// arguments, of a tool annotated as hs, encoded as headerValue encodes
// (Base64 where the value is not plain printable ASCII). An argument that
// is absent, null or not of its annotated type has no header.
func paramHeaderValues(hs []paramHeader, arguments json.RawMessage) map[string]string {
	out := map[string]string{}
	for _, h := range hs {
		if v := argumentAt(arguments, h.path); v != nil {
			if text, ok := headerText(v, h.typ); ok {
				out[h.header()] = headerValue(text)
			}
		}
	}
	return out
}

// errBadBase64 says a header's "=?base64?...?=" value does not decode.
var errBadBase64 = errors.New("its =?base64?...?= value is not valid Base64")

// decodeParamHeader returns a header's value as the client meant it: an
// encoded one decoded ("servers MUST decode an encoded Mcp-Name or
// Mcp-Param-{Name} value before comparing it"), or an error if it does
// not decode or holds a character a header value may not (anything but
// visible ASCII, space and tab: "Servers MUST reject requests with a
// recognized Mcp-Param-{Name} header that contains invalid characters").
func decodeParamHeader(v string) (string, error) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '\t' && (c < 0x20 || c > 0x7E) {
			return "", fmt.Errorf("it holds the byte 0x%02x; a header value is visible ASCII, space and tab, else =?base64?...?=", c)
		}
	}
	if inner, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if inner, ok = strings.CutSuffix(inner, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(inner)
			if err != nil {
				return "", errBadBase64
			}
			return string(b), nil
		}
	}
	return strings.Trim(v, " \t"), nil
}

// checkParamHeaders checks the Mcp-Param headers of a modern client's
// tools/call of a tool annotated as hs against arguments, the call's, and
// returns the error to answer with (-32020, HeaderMismatch), or nil. "Any
// server that processes the message body MUST validate that encoded header
// values, after decoding if Base64-encoded, match the corresponding values
// in the request body": a value in the body needs its header ("Client omits
// header but value is in body: Server MUST reject the request"), a header
// needs its value, and they must be equal, integers compared as numbers
// ("servers SHOULD compare the header value and the body value numerically
// rather than as strings (e.g., 42.0 and 42 are considered equal)"). A
// header the annotations do not name is not recognised, and so ignored:
// "Intermediate servers that do not recognize an Mcp-Param-{Name} header
// MUST forward it and otherwise ignore it".
func checkParamHeaders(header http.Header, tool string, hs []paramHeader, arguments json.RawMessage) *wireError {
	mismatch := func(format string, args ...any) *wireError {
		return &wireError{Code: codeHeaderMismatch, Message: fmt.Sprintf("tools/call of %q: ", tool) + fmt.Sprintf(format, args...)}
	}
	for _, h := range hs {
		values := header.Values(h.header())
		body := argumentAt(arguments, h.path)
		arg := strings.Join(h.path, ".")
		switch {
		case len(values) > 1:
			return mismatch("the %s header is sent %d times; send it once", h.header(), len(values))
		case body == nil && len(values) == 0:
			continue
		case body == nil:
			return mismatch("the %s header is sent, and the arguments have no %s; send the header only with the argument", h.header(), arg)
		case len(values) == 0:
			return mismatch("the arguments hold %s, which the tool's inputSchema marks with x-mcp-header %q, and the %s header is missing; send it with the argument's value", arg, h.name, h.header())
		}
		got, err := decodeParamHeader(values[0])
		if err != nil {
			return mismatch("the %s header is malformed: %v", h.header(), err)
		}
		if !sameArgument(got, body, h.typ) {
			return mismatch("the %s header is %q, and the arguments' %s is %s", h.header(), truncate([]byte(got), 100), arg, truncate(body, 100))
		}
	}
	return nil
}

// sameArgument reports whether header text got stands for body, an
// argument of type typ.
func sameArgument(got string, body json.RawMessage, typ string) bool {
	if typ == "integer" {
		var b float64
		h, err := strconv.ParseFloat(got, 64)
		return err == nil && json.Unmarshal(body, &b) == nil && h == b
	}
	want, ok := headerText(body, typ)
	return ok && got == want
}
