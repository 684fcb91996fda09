//go:build linux || darwin

package main

// # Conformance mode
//
// With -conformance, the server serves what the server scenarios of the
// official MCP conformance suite (the npm package
// @modelcontextprotocol/conformance) call, in place of its own tools,
// resources, prompts and completions, so that the suite can be run against
// it directly (-http) and through a gateway (stdio). Everything here was
// written from the scenarios' descriptions and the checks they make, not
// from the suite's own reference server. Other requests (initialize, ping,
// logging/setLevel, resources/subscribe and resources/unsubscribe) are
// served as above; -prefix, -extra-tools, -page-size and -huge-catalog do
// not apply. With -http, a request whose Host, or Origin if it has one, names
// a host other than localhost, 127.0.0.1 or [::1] gets 403 (the suite's DNS
// rebinding check).
//
// Tools (no arguments unless said otherwise):
//
//	test_simple_text
//		Text "This is a simple text response for testing."
//	test_image_content
//		An image block: a 1x1 red PNG, image/png.
//	test_audio_content
//		An audio block: a tenth of a second of silence as WAV, audio/wav.
//	test_embedded_resource
//		A resource block: test://embedded-resource, text/plain, "This is an
//		embedded resource content."
//	test_multiple_content_types
//		A text, the image and a resource block (test://mixed-content-resource,
//		application/json).
//	test_tool_with_logging
//		Sends notifications/message at info ("Tool execution started", "Tool
//		processing data", "Tool execution completed"), 50 ms apart, each
//		unless logging/setLevel set a more severe level; answers text.
//	test_error_handling
//		A result with isError true and the text "This tool intentionally
//		returns an error for testing".
//	test_tool_with_progress
//		With params._meta.progressToken, sends notifications/progress 0, 50
//		and 100 of total 100, 50 ms apart; answers text.
//	test_sampling {prompt: string}
//		Asks the client for sampling/createMessage of prompt (maxTokens 100)
//		and answers "LLM response: TEXT".
//	test_elicitation {message: string}
//		Asks the client for elicitation/create of message with a schema of
//		username and email, both required strings, and answers "User
//		response: action=ACTION, content=JSON".
//	test_elicitation_sep1034_defaults
//		Asks for elicitation/create with a default for each primitive type:
//		name "John Doe", age 30 (integer), score 95.5 (number), status
//		"active" (enum active, inactive, pending), verified true; answers
//		"Elicitation completed: action=ACTION, content=JSON".
//	test_elicitation_sep1330_enums
//		Asks for elicitation/create with the five enum forms of SEP-1330
//		(untitledSingle, titledSingle, legacyEnum, untitledMulti,
//		titledMulti); answers as the one above.
//	json_schema_2020_12_tool
//		Listed with an input schema using JSON Schema 2020-12 ($schema,
//		$defs with an $anchor, $ref, allOf/anyOf, if/then/else,
//		additionalProperties); answers text.
//	test_custom_header {region: string}
//		Its argument is annotated "x-mcp-header": "Region" (SEP-2243, for
//		the draft scenario of parameter headers, whose checks fall to a
//		gateway in front); answers "region: REGION".
//
// sampling and elicitation tools whose client did not declare the
// capability at initialize answer an isError result saying so; an error
// answer of the client, or none within 30 seconds, is an isError result too.
//
// Resources: test://static-text (text/plain), test://static-binary
// (image/png, the PNG as blob) and test://watched-resource (text/plain);
// the template test://template/{id}/data reads as application/json
// {"id":ID,"templateTest":true,"data":"Data for ID: ID"}. Another URI gets
// -32002 "Resource not found" with data {"uri":URI}.
//
// Prompts: test_simple_prompt; test_prompt_with_arguments {arg1, arg2}
// ("Prompt with arguments: arg1='A', arg2='B'"); test_prompt_with_embedded_resource
// {resourceUri} (a resource block of that URI, then a text); and
// test_prompt_with_image (an image block, then a text). A missing argument
// gets -32602.
//
// completion/complete completes arg1 and arg2 of test_prompt_with_arguments
// and id of the template, from fixed values that start with the value sent
// (none may); other refs get -32602.

import (
	"bytes"
	"encoding/base64"
	binenc "encoding/binary" // main_test.go has a binary of its own
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// conformanceState is what the conformance mode keeps per session.
type conformanceState struct {
	mu         sync.Mutex
	clientCaps map[string]json.RawMessage // the client's capabilities at initialize
}

// setClientCapabilities records the capabilities of initialize's params.
func (cs *conformanceState) setClientCapabilities(raw json.RawMessage) {
	var caps map[string]json.RawMessage
	decodeParams(raw, &caps) // none is as good as bad ones
	cs.mu.Lock()
	cs.clientCaps = caps
	cs.mu.Unlock()
}

// clientHas reports whether the client declared capability name.
func (cs *conformanceState) clientHas(name string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	_, ok := cs.clientCaps[name]
	return ok
}

// Fixtures of the conformance mode, made once.
var (
	confPNG = redPixelPNG()
	confWAV = silentWAV()
)

// redPixelPNG returns a 1x1 red PNG, base64-encoded.
func redPixelPNG() string {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err) // cannot happen
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// silentWAV returns 100 ms of 8 kHz 8-bit mono silence as WAV, base64-encoded.
func silentWAV() string {
	const rate, samples = 8000, 800
	var buf bytes.Buffer
	w := func(v any) { binenc.Write(&buf, binenc.LittleEndian, v) }
	buf.WriteString("RIFF")
	w(uint32(36 + samples))
	buf.WriteString("WAVEfmt ")
	w(uint32(16))   // size of the fmt chunk
	w(uint16(1))    // PCM
	w(uint16(1))    // mono
	w(uint32(rate)) // sample rate
	w(uint32(rate)) // bytes a second
	w(uint16(1))    // bytes a frame
	w(uint16(8))    // bits a sample
	buf.WriteString("data")
	w(uint32(samples))
	buf.Write(bytes.Repeat([]byte{128}, samples)) // 8-bit PCM's silence
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// confTool is a tool of the conformance mode.
type confTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

// noArgs is the input schema of a tool without arguments.
func noArgs() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

// stringArgs is the input schema of a tool whose arguments are all required
// strings, described by the pairs name, description.
func stringArgs(pairs ...string) map[string]any {
	props := map[string]any{}
	var required []string
	for i := 0; i+1 < len(pairs); i += 2 {
		props[pairs[i]] = map[string]any{"type": "string", "description": pairs[i+1]}
		required = append(required, pairs[i])
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

// schema2020 is the input schema of json_schema_2020_12_tool.
const schema2020 = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {"address": {"$anchor": "addressDef", "type": "object",
		"properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
	"properties": {
		"name": {"type": "string"},
		"address": {"$ref": "#/$defs/address"},
		"contactMethod": {"type": "string", "enum": ["phone", "email"]},
		"phone": {"type": "string"},
		"email": {"type": "string"}
	},
	"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
	"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
	"then": {"required": ["phone"]},
	"else": {"required": ["email"]},
	"additionalProperties": false
}`

// confTools returns the tools of the conformance mode, in tools/list order.
func confTools() []confTool {
	var s2020 map[string]any
	if err := json.Unmarshal([]byte(schema2020), &s2020); err != nil {
		panic(err) // cannot happen
	}
	return []confTool{
		{"test_simple_text", "Answers a simple text.", noArgs()},
		{"test_image_content", "Answers a 1x1 red PNG image.", noArgs()},
		{"test_audio_content", "Answers a short silent WAV audio.", noArgs()},
		{"test_embedded_resource", "Answers an embedded text resource.", noArgs()},
		{"test_multiple_content_types", "Answers text, image and resource content.", noArgs()},
		{"test_tool_with_logging", "Sends three log messages while it runs.", noArgs()},
		{"test_error_handling", "Always answers a tool error.", noArgs()},
		{"test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", noArgs()},
		{"test_sampling", "Asks the client to sample a message.", stringArgs("prompt", "The prompt to send to the LLM")},
		{"test_elicitation", "Asks the user for a username and an email.", stringArgs("message", "The message to show the user")},
		{"test_elicitation_sep1034_defaults", "Asks the user with a default for each primitive type (SEP-1034).", noArgs()},
		{"test_elicitation_sep1330_enums", "Asks the user with the five enum forms (SEP-1330).", noArgs()},
		{"json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", s2020},
		{"test_custom_header", "Answers its region, which a 2026-07-28 client also sends as the Mcp-Param-Region header.", map[string]any{
			"type": "object", "required": []string{"region"},
			"properties": map[string]any{"region": map[string]any{"type": "string", "description": "A region.", "x-mcp-header": "Region"}},
		}},
	}
}

// block is a content block of a tool's result or a prompt's message.
type block map[string]any

func textBlock(text string) block { return block{"type": "text", "text": text} }

func imageBlock() block { return block{"type": "image", "data": confPNG, "mimeType": "image/png"} }

func resourceBlock(uri, mimeType, text string) block {
	return block{"type": "resource", "resource": map[string]any{"uri": uri, "mimeType": mimeType, "text": text}}
}

// confResult is the result of a conformance tool.
type confResult struct {
	Content []block `json:"content"`
	IsError bool    `json:"isError,omitempty"`
}

// conformanceHandle handles m if the conformance mode serves it in place of
// the server's own features, and reports whether it did.
func (s *server) conformanceHandle(c *call, m message, tc *toolCall) bool {
	switch m.Method {
	case "tools/list":
		c.reply(map[string]any{"tools": confTools()})
	case "tools/call":
		if tc == nil {
			c.fail(codeInvalidParams, "invalid params")
		} else {
			s.confCall(c, tc)
		}
	case "resources/list":
		c.reply(map[string]any{"resources": []map[string]string{
			{"uri": "test://static-text", "name": "static-text", "description": "A static text resource.", "mimeType": "text/plain"},
			{"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource: a PNG.", "mimeType": "image/png"},
			{"uri": "test://watched-resource", "name": "watched-resource", "description": "A resource to subscribe to.", "mimeType": "text/plain"},
		}})
	case "resources/templates/list":
		c.reply(map[string]any{"resourceTemplates": []map[string]string{
			{"uriTemplate": "test://template/{id}/data", "name": "template-data", "description": "Data for an ID.", "mimeType": "application/json"},
		}})
	case "resources/read":
		s.confRead(c, m.Params)
	case "prompts/list":
		arg := func(name, description string) map[string]any {
			return map[string]any{"name": name, "description": description, "required": true}
		}
		c.reply(map[string]any{"prompts": []map[string]any{
			{"name": "test_simple_prompt", "description": "A prompt without arguments."},
			{"name": "test_prompt_with_arguments", "description": "A prompt with two arguments.",
				"arguments": []map[string]any{arg("arg1", "First test argument"), arg("arg2", "Second test argument")}},
			{"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource.",
				"arguments": []map[string]any{arg("resourceUri", "URI of the resource to embed")}},
			{"name": "test_prompt_with_image", "description": "A prompt with an image."},
		}})
	case "prompts/get":
		s.confPrompt(c, m.Params)
	case "completion/complete":
		s.confComplete(c, m.Params)
	default:
		return false
	}
	return true
}

// confCall answers tools/call of a conformance tool.
func (s *server) confCall(c *call, tc *toolCall) {
	var args map[string]any
	if err := decodeParams(tc.Arguments, &args); err != nil {
		c.fail(codeInvalidParams, "invalid arguments: "+err.Error())
		return
	}
	reply := func(blocks ...block) { c.reply(confResult{Content: blocks}) }
	switch tc.Name {
	case "test_simple_text":
		reply(textBlock("This is a simple text response for testing."))
	case "test_image_content":
		reply(imageBlock())
	case "test_audio_content":
		reply(block{"type": "audio", "data": confWAV, "mimeType": "audio/wav"})
	case "test_embedded_resource":
		reply(resourceBlock("test://embedded-resource", "text/plain", "This is an embedded resource content."))
	case "test_multiple_content_types":
		reply(textBlock("Multiple content types test:"), imageBlock(),
			resourceBlock("test://mixed-content-resource", "application/json", `{"test":"data","value":123}`))
	case "test_tool_with_logging":
		for i, text := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 && !sleepCtx(c.ctx, 50) {
				return
			}
			if s.logThreshold(c) <= 1 { // info passes
				s.send(notification{JSONRPC: "2.0", Method: "notifications/message",
					Params: logParams{Level: "info", Logger: "conformance", Data: text}})
			}
		}
		reply(textBlock("Tool with logging executed successfully"))
	case "test_error_handling":
		c.reply(confResult{Content: []block{textBlock("This tool intentionally returns an error for testing")}, IsError: true})
	case "test_tool_with_progress":
		for i, p := range []int{0, 50, 100} {
			if i > 0 && !sleepCtx(c.ctx, 50) {
				return
			}
			if c.progressToken != nil {
				s.send(notification{JSONRPC: "2.0", Method: "notifications/progress",
					Params: map[string]any{"progressToken": c.progressToken, "progress": p, "total": 100}})
			}
		}
		reply(textBlock("Tool with progress executed successfully"))
	case "test_sampling":
		prompt, ok := requiredString(c, args, "prompt")
		if !ok {
			return
		}
		params := map[string]any{
			"messages":  []map[string]any{{"role": "user", "content": textBlock(prompt)}},
			"maxTokens": 100,
		}
		s.confAsk(c, "sampling", "sampling/createMessage", params, func(result json.RawMessage) string {
			var r struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			json.Unmarshal(result, &r) // keep what could be decoded
			return "LLM response: " + r.Content.Text
		})
	case "test_elicitation":
		message, ok := requiredString(c, args, "message")
		if !ok {
			return
		}
		schema := map[string]any{"type": "object", "properties": map[string]any{
			"username": map[string]any{"type": "string", "description": "User's response"},
			"email":    map[string]any{"type": "string", "description": "User's email address"},
		}, "required": []string{"username", "email"}}
		s.confElicit(c, message, schema, "User response: ")
	case "test_elicitation_sep1034_defaults":
		schema := map[string]any{"type": "object", "properties": map[string]any{
			"name":     map[string]any{"type": "string", "description": "Your name", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "description": "Your age", "default": 30},
			"score":    map[string]any{"type": "number", "description": "Your score", "default": 95.5},
			"status":   map[string]any{"type": "string", "description": "Your status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "description": "Whether you are verified", "default": true},
		}}
		s.confElicit(c, "Please review and update the form fields with defaults", schema, "Elicitation completed: ")
	case "test_elicitation_sep1330_enums":
		titled := func(pairs ...string) []map[string]string {
			var out []map[string]string
			for i := 0; i+1 < len(pairs); i += 2 {
				out = append(out, map[string]string{"const": pairs[i], "title": pairs[i+1]})
			}
			return out
		}
		options := []string{"option1", "option2", "option3"}
		schema := map[string]any{"type": "object", "properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "description": "Pick one", "enum": options},
			"titledSingle": map[string]any{"type": "string", "description": "Pick one",
				"oneOf": titled("value1", "First Option", "value2", "Second Option", "value3", "Third Option")},
			"legacyEnum": map[string]any{"type": "string", "description": "Pick one",
				"enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
			"untitledMulti": map[string]any{"type": "array", "description": "Pick any",
				"items": map[string]any{"type": "string", "enum": options}},
			"titledMulti": map[string]any{"type": "array", "description": "Pick any",
				"items": map[string]any{"anyOf": titled("value1", "First Choice", "value2", "Second Choice", "value3", "Third Choice")}},
		}}
		s.confElicit(c, "Please choose from the enum fields", schema, "Elicitation completed: ")
	case "json_schema_2020_12_tool":
		reply(textBlock("JSON Schema 2020-12 tool called"))
	case "test_custom_header":
		if region, ok := requiredString(c, args, "region"); ok {
			reply(textBlock("region: " + region))
		}
	default:
		c.fail(codeInvalidParams, fmt.Sprintf("unknown tool %q", tc.Name))
	}
}

// requiredString returns the string argument name. If it is missing or not
// a string, it answers c with an error and reports false.
func requiredString(c *call, args map[string]any, name string) (string, bool) {
	v, ok := args[name].(string)
	if !ok {
		c.fail(codeInvalidParams, fmt.Sprintf("invalid arguments: %s must be a string", name))
	}
	return v, ok
}

// confElicit asks the client for elicitation/create of message and schema
// and answers prefix followed by the action and the content.
func (s *server) confElicit(c *call, message string, schema map[string]any, prefix string) {
	params := map[string]any{"message": message, "requestedSchema": schema}
	s.confAsk(c, "elicitation", "elicitation/create", params, func(result json.RawMessage) string {
		var r struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(result, &r) // keep what could be decoded
		if r.Content == nil {
			r.Content = json.RawMessage("{}")
		}
		return fmt.Sprintf("%saction=%s, content=%s", prefix, r.Action, compact(r.Content))
	})
}

// confAsk sends the client a request of method, which needs its capability,
// and answers c with the text describe makes of the result, or with a tool
// error if the client lacks the capability or the request failed.
func (s *server) confAsk(c *call, capability, method string, params any, describe func(json.RawMessage) string) {
	if c.modern == nil && !s.conformance.clientHas(capability) {
		c.reply(confResult{Content: []block{textBlock("the client did not declare the " + capability + " capability")}, IsError: true})
		return
	}
	result, failure, ok := s.obtain(c, capability, method, params)
	switch {
	case !ok:
	case failure != "":
		c.reply(confResult{Content: []block{textBlock(capability + " failed: " + failure)}, IsError: true})
	default:
		c.reply(confResult{Content: []block{textBlock(describe(result))}})
	}
}

// confTemplate matches the URIs of the template test://template/{id}/data.
var confTemplate = regexp.MustCompile(`^test://template/([^/]+)/data$`)

// confRead answers resources/read.
func (s *server) confRead(c *call, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	var item map[string]string
	switch p.URI {
	case "test://static-text":
		item = map[string]string{"mimeType": "text/plain", "text": "This is the content of the static text resource."}
	case "test://static-binary":
		item = map[string]string{"mimeType": "image/png", "blob": confPNG}
	case "test://watched-resource":
		item = map[string]string{"mimeType": "text/plain", "text": "Watched resource content."}
	default:
		sm := confTemplate.FindStringSubmatch(p.URI)
		if sm == nil {
			code := codeResourceNotFound
			if c.modern != nil {
				code = codeInvalidParams // the modern protocol retired -32002
			}
			c.failData(code, "Resource not found", map[string]string{"uri": p.URI})
			return
		}
		id, err := url.PathUnescape(sm[1])
		if err != nil {
			id = sm[1]
		}
		data, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
		item = map[string]string{"mimeType": "application/json", "text": string(data)}
	}
	item["uri"] = p.URI
	c.reply(map[string]any{"contents": []map[string]string{item}})
}

// confPrompt answers prompts/get.
func (s *server) confPrompt(c *call, params json.RawMessage) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	arg := func(name string) (string, bool) {
		v, ok := p.Arguments[name]
		if !ok {
			c.fail(codeInvalidParams, fmt.Sprintf("missing argument %q of prompt %q", name, p.Name))
		}
		return v, ok
	}
	user := func(b block) map[string]any { return map[string]any{"role": "user", "content": b} }
	var messages []map[string]any
	switch p.Name {
	case "test_simple_prompt":
		messages = append(messages, user(textBlock("This is a simple prompt for testing.")))
	case "test_prompt_with_arguments":
		a1, ok1 := arg("arg1")
		if !ok1 {
			return
		}
		a2, ok2 := arg("arg2")
		if !ok2 {
			return
		}
		messages = append(messages, user(textBlock(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a1, a2))))
	case "test_prompt_with_embedded_resource":
		uri, ok := arg("resourceUri")
		if !ok {
			return
		}
		messages = append(messages, user(resourceBlock(uri, "text/plain", "Embedded resource content for testing.")),
			user(textBlock("Please process the embedded resource above.")))
	case "test_prompt_with_image":
		messages = append(messages, user(imageBlock()), user(textBlock("Please analyze the image above.")))
	default:
		c.fail(codeInvalidParams, fmt.Sprintf("unknown prompt %q", p.Name))
		return
	}
	c.reply(map[string]any{"messages": messages})
}

// confComplete answers completion/complete.
func (s *server) confComplete(c *call, params json.RawMessage) {
	var p completeParams
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	var choices []string
	switch {
	case p.Ref.Type == "ref/prompt" && p.Ref.Name == "test_prompt_with_arguments" && (p.Argument.Name == "arg1" || p.Argument.Name == "arg2"):
		choices = []string{"hello", "paris", "park", "party", "test", "world"}
	case p.Ref.Type == "ref/resource" && p.Ref.URI == "test://template/{id}/data" && p.Argument.Name == "id":
		choices = []string{"1", "123", "2", "3"}
	default:
		c.fail(codeInvalidParams, "no completions for this ref and argument")
		return
	}
	values := []string{}
	for _, v := range choices {
		if strings.HasPrefix(v, p.Argument.Value) {
			values = append(values, v)
		}
	}
	c.reply(map[string]any{"completion": map[string]any{"values": values, "total": len(values), "hasMore": false}})
}

// localOrigin reports whether r's Host, and its Origin if it has one, name
// a loopback host by a name a DNS rebinding attack cannot use.
func localOrigin(r *http.Request) bool {
	local := func(host string) bool {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		return host == "localhost" || host == "127.0.0.1" || host == "::1"
	}
	if !local(r.Host) {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && local(u.Host)
	}
	return true
}
