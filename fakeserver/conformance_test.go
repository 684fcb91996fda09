//go:build linux

package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The conformance mode is checked in CI by the official suite itself
// (.ci/mcpconformance/run); these tests keep it from rotting without npm.

func TestConformanceModeListsTheScenariosFixtures(t *testing.T) {
	p := start(t, "-conformance")
	p.initialize("2025-11-25")
	var tools struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	p.request(1, "tools/list", nil)
	p.expectResult(1, &tools)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || !strings.Contains(string(tl.InputSchema), `"type":"object"`) {
			t.Errorf("tool %s: description %q, schema %s; want both", tl.Name, tl.Description, tl.InputSchema)
		}
		if tl.Name == "test_custom_header" && !strings.Contains(string(tl.InputSchema), `"x-mcp-header":"Region"`) {
			t.Errorf("test_custom_header's schema lacks its x-mcp-header: %s", tl.InputSchema)
		}
		if tl.Name == "json_schema_2020_12_tool" {
			for _, kw := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$defs"`, `"$anchor"`, `"allOf"`, `"if"`, `"additionalProperties":false`} {
				if !strings.Contains(string(tl.InputSchema), kw) {
					t.Errorf("json_schema_2020_12_tool's schema lacks %s: %s", kw, tl.InputSchema)
				}
			}
		}
	}
	for _, want := range []string{"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
		"test_multiple_content_types", "test_tool_with_logging", "test_error_handling", "test_tool_with_progress",
		"test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
		"json_schema_2020_12_tool", "test_custom_header"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "echo") {
		t.Errorf("tools/list has fakeserver's own echo in conformance mode: %v", names)
	}

	p.request(2, "resources/list", nil)
	m := p.expect(2)
	for _, uri := range []string{"test://static-text", "test://static-binary", "test://watched-resource"} {
		if !strings.Contains(string(m.Result), `"uri":"`+uri+`"`) {
			t.Errorf("resources/list lacks %s: %s", uri, m.Result)
		}
	}
	p.request(3, "resources/templates/list", nil)
	if m := p.expect(3); !strings.Contains(string(m.Result), `"uriTemplate":"test://template/{id}/data"`) {
		t.Errorf("resources/templates/list = %s, want the template", m.Result)
	}
	p.request(4, "prompts/list", nil)
	m = p.expect(4)
	for _, name := range []string{"test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image"} {
		if !strings.Contains(string(m.Result), `"name":"`+name+`"`) {
			t.Errorf("prompts/list lacks %s: %s", name, m.Result)
		}
	}
}

func TestConformanceModeAnswersTheScenariosCalls(t *testing.T) {
	p := start(t, "-conformance")
	p.initializeWith("2025-11-25", map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}})

	p.callTool(1, "test_simple_text", nil)
	if text := p.expectText(1); text != "This is a simple text response for testing." {
		t.Errorf("test_simple_text = %q", text)
	}
	p.callTool(2, "test_error_handling", nil)
	if text, isError := p.expectToolResult(2); !isError || text == "" {
		t.Errorf("test_error_handling = %q, isError %v; want an error with a text", text, isError)
	}

	var mixed struct {
		Content []struct {
			Type     string `json:"type"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
			Resource struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"resource"`
		} `json:"content"`
	}
	p.callTool(3, "test_multiple_content_types", nil)
	p.expectResult(3, &mixed)
	if len(mixed.Content) != 3 || mixed.Content[0].Type != "text" || mixed.Content[1].Type != "image" || mixed.Content[2].Resource.URI != "test://mixed-content-resource" {
		t.Fatalf("test_multiple_content_types = %+v, want text, image, resource", mixed)
	}
	png, err := base64.StdEncoding.DecodeString(mixed.Content[1].Data)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG\r\n\x1a\n") || mixed.Content[1].MimeType != "image/png" {
		t.Errorf("the image is %q (%v), %s; want a base64 PNG", mixed.Content[1].Data, err, mixed.Content[1].MimeType)
	}
	p.callTool(4, "test_audio_content", nil)
	if m := p.expect(4); !strings.Contains(string(m.Result), `"mimeType":"audio/wav"`) || !strings.Contains(string(m.Result), `"data":"UklGR`) {
		t.Errorf("test_audio_content = %s, want base64 WAV (RIFF...)", m.Result)
	}

	p.request(5, "tools/call", map[string]any{"name": "test_tool_with_progress", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "tok"}})
	for _, want := range []string{`"progress":0`, `"progress":50`, `"progress":100`} {
		if n := p.expectNotification("notifications/progress"); !strings.Contains(string(n.Params), want) || !strings.Contains(string(n.Params), `"progressToken":"tok"`) {
			t.Errorf("progress = %s, want %s of token tok", n.Params, want)
		}
	}
	p.expectText(5)

	p.request(6, "logging/setLevel", map[string]any{"level": "debug"})
	p.expect(6)
	p.callTool(7, "test_tool_with_logging", nil)
	for _, want := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if n := p.expectNotification("notifications/message"); !strings.Contains(string(n.Params), want) {
			t.Errorf("log = %s, want %q", n.Params, want)
		}
	}
	p.expectText(7)

	p.callTool(8, "test_sampling", map[string]any{"prompt": "say hi"})
	req := p.expectServerRequest("sampling/createMessage")
	if !strings.Contains(string(req.Params), `"text":"say hi"`) || !strings.Contains(string(req.Params), `"maxTokens":100`) {
		t.Errorf("sampling request = %s", req.Params)
	}
	p.respond(req.ID, map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "hi"}, "model": "m"})
	if text := p.expectText(8); text != "LLM response: hi" {
		t.Errorf("test_sampling = %q", text)
	}

	p.callTool(9, "test_elicitation_sep1034_defaults", nil)
	req = p.expectServerRequest("elicitation/create")
	for _, want := range []string{`"default":"John Doe"`, `"default":30`, `"default":95.5`, `"default":"active"`, `"default":true`} {
		if !strings.Contains(string(req.Params), want) {
			t.Errorf("elicitation request lacks %s: %s", want, req.Params)
		}
	}
	p.respond(req.ID, map[string]any{"action": "accept", "content": map[string]any{"name": "Jo"}})
	if text := p.expectText(9); text != `Elicitation completed: action=accept, content={"name":"Jo"}` {
		t.Errorf("test_elicitation_sep1034_defaults = %q", text)
	}

	p.request(10, "resources/read", map[string]any{"uri": "test://template/123/data"})
	if m := p.expect(10); !strings.Contains(string(m.Result), `"uri":"test://template/123/data"`) || !strings.Contains(string(m.Result), `Data for ID: 123`) {
		t.Errorf("template read = %s", m.Result)
	}
	p.request(11, "resources/read", map[string]any{"uri": "test://nope"})
	if m := p.expect(11); m.Error == nil || m.Error.Code != codeResourceNotFound || !strings.Contains(string(m.Error.Data), `"uri":"test://nope"`) {
		t.Errorf("unknown resource = %s, want -32002 with the uri in data", m.Line)
	}
	p.request(12, "prompts/get", map[string]any{"name": "test_prompt_with_arguments", "arguments": map[string]any{"arg1": "hello", "arg2": "world"}})
	if m := p.expect(12); !strings.Contains(string(m.Result), `Prompt with arguments: arg1='hello', arg2='world'`) {
		t.Errorf("prompts/get = %s", m.Result)
	}
	p.request(13, "prompts/get", map[string]any{"name": "test_prompt_with_arguments", "arguments": map[string]any{"arg1": "x"}})
	if m := p.expect(13); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("prompts/get without arg2 = %s, want -32602", m.Line)
	}
	p.request(14, "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": map[string]any{"name": "arg1", "value": "par"}})
	if m := p.expect(14); !strings.Contains(string(m.Result), `"values":["paris","park","party"]`) {
		t.Errorf("completion/complete = %s", m.Result)
	}
}

func TestConformanceModeRefusesSamplingWithoutTheCapability(t *testing.T) {
	p := start(t, "-conformance")
	p.initialize("2025-11-25") // no client capabilities
	p.callTool(1, "test_sampling", map[string]any{"prompt": "x"})
	if text, isError := p.expectToolResult(1); !isError || !strings.Contains(text, "sampling capability") {
		t.Errorf("test_sampling without the capability = %q, isError %v; want an error naming it", text, isError)
	}
}

func TestConformanceModeOverHTTP(t *testing.T) {
	url := startHTTP(t, "-http", "127.0.0.1:0", "-conformance")
	// A rebinding attack's Host is refused; a local one is served.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeBody))
	req.Host = "evil.example.com"
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host evil.example.com = %v, %v; want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, _ := post(t, url, "", initializeBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize = %s", resp.Status)
	}
	// A client that takes an event stream gets the progress before the
	// answer on the POST's own stream.
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":7}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("tools/call = %v, %v; want an event stream", stream, err)
	}
	defer stream.Body.Close()
	var got []string
	for ev := range events(stream.Body) {
		got = append(got, ev[1])
	}
	if len(got) != 4 || !strings.Contains(got[2], `"progress":100`) || !strings.Contains(got[3], `"id":2`) {
		t.Errorf("the POST's stream = %q, want three progress notifications, then the answer", got)
	}
}
