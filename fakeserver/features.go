//go:build linux || darwin

package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// capabilities is the capabilities member of the result of initialize. A nil
// member is an undeclared capability.
type capabilities struct {
	Tools       *listChangedCapability `json:"tools,omitempty"`
	Resources   *resourcesCapability   `json:"resources,omitempty"`
	Prompts     *listChangedCapability `json:"prompts,omitempty"`
	Completions *struct{}              `json:"completions,omitempty"`
	Logging     *struct{}              `json:"logging,omitempty"`
	Tasks       *tasksCapability       `json:"tasks,omitempty"`
	// Extensions declares MCP Apps' extension (-ui) and, in
	// server/discover, the 2026-07-28 tasks extension when tasks are
	// declared.
	Extensions map[string]any `json:"extensions,omitempty"`
}

type listChangedCapability struct {
	ListChanged bool `json:"listChanged"`
}

type resourcesCapability struct {
	Subscribe   bool `json:"subscribe"`
	ListChanged bool `json:"listChanged"`
}

// capabilities returns the capabilities declared by -capabilities.
func (s *server) capabilities() capabilities {
	var c capabilities
	declared := s.opts.capabilities
	if declared["tools"] {
		c.Tools = &listChangedCapability{ListChanged: true}
	}
	if declared["resources"] {
		c.Resources = &resourcesCapability{Subscribe: true, ListChanged: true}
	}
	if declared["prompts"] {
		c.Prompts = &listChangedCapability{ListChanged: true}
	}
	if declared["completions"] {
		c.Completions = &struct{}{}
	}
	if declared["logging"] {
		c.Logging = &struct{}{}
	}
	if declared["tasks"] {
		c.Tasks = &tasksCapability{}
	}
	if s.opts.ui {
		c.Extensions = map[string]any{appExtension: map[string]any{"mimeTypes": []string{appMimeType}}}
	}
	return c
}

// The MCP Apps extension (-ui): its identifier, the MIME type of its
// resources.
const (
	appExtension = "io.modelcontextprotocol/ui"
	appMimeType  = "text/html;profile=mcp-app"
)

// appURI returns the URI of -ui's app resource.
func (s *server) appURI() string {
	return "ui://" + s.opts.name + "/app.html"
}

// resourceURI returns the URI of the server's resource at path.
func (s *server) resourceURI(path string) string {
	return "fake://" + s.opts.name + "/" + path
}

// resourceDescriptor describes a resource in the result of resources/list.
type resourceDescriptor struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType,omitempty"`
}

// resourceTemplate describes a template in the result of
// resources/templates/list.
type resourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
}

// resourceContents is an item of the contents of the result of
// resources/read.
type resourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

// listResources answers resources/list.
func (s *server) listResources(c *call, params json.RawMessage) {
	all := []resourceDescriptor{
		{URI: s.resourceURI("hello"), Name: "hello", MimeType: "text/plain"},
		{URI: s.resourceURI("counter"), Name: "counter"},
	}
	if s.opts.ui {
		all = append(all, resourceDescriptor{URI: s.appURI(), Name: "app", MimeType: appMimeType})
	}
	start, end, ok := s.page(c, params, len(all))
	if !ok {
		return
	}
	c.reply(struct {
		Resources  []resourceDescriptor `json:"resources"`
		NextCursor string               `json:"nextCursor,omitempty"`
	}{all[start:end], nextCursor(end, len(all))})
}

// listResourceTemplates answers resources/templates/list.
func (s *server) listResourceTemplates(c *call, params json.RawMessage) {
	all := []resourceTemplate{{URITemplate: s.resourceURI("echo/{text}"), Name: "echo"}}
	start, end, ok := s.page(c, params, len(all))
	if !ok {
		return
	}
	c.reply(struct {
		ResourceTemplates []resourceTemplate `json:"resourceTemplates"`
		NextCursor        string             `json:"nextCursor,omitempty"`
	}{all[start:end], nextCursor(end, len(all))})
}

// readResource answers resources/read.
func (s *server) readResource(c *call, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	text, ok := s.resourceText(p.URI)
	if !ok {
		code := codeResourceNotFound
		if c.modern != nil {
			code = codeInvalidParams // the modern protocol retired -32002
		}
		c.fail(code, "resource not found: "+p.URI)
		return
	}
	mime := "text/plain"
	if s.opts.ui && p.URI == s.appURI() {
		mime = appMimeType
	}
	c.reply(struct {
		Contents []resourceContents `json:"contents"`
	}{[]resourceContents{{URI: p.URI, MimeType: mime, Text: text}}})
}

// resourceText returns the text of the resource at uri. It reports false if
// there is no such resource.
func (s *server) resourceText(uri string) (string, bool) {
	switch uri {
	case s.resourceURI("hello"):
		return "hello from " + s.opts.name, true
	case s.appURI():
		if s.opts.ui {
			return "<!doctype html><title>app of " + s.opts.name + "</title>", true
		}
	case s.resourceURI("counter"):
		s.mu.Lock()
		defer s.mu.Unlock()
		return strconv.Itoa(s.counter), true
	}
	if escaped, ok := strings.CutPrefix(uri, s.resourceURI("echo/")); ok {
		text, err := url.PathUnescape(escaped)
		return text, err == nil
	}
	return "", false
}

// subscribe answers resources/subscribe and resources/unsubscribe, the
// given method.
func (s *server) subscribe(c *call, method string, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	subscribe := method == "resources/subscribe"
	s.mu.Lock()
	if subscribe {
		s.subscribed[p.URI] = true
	} else {
		delete(s.subscribed, p.URI)
	}
	s.mu.Unlock()
	s.record(event{Event: strings.TrimPrefix(method, "resources/"), URI: p.URI})
	c.reply(struct{}{})
}

// promptArgument describes an argument of a prompt.
type promptArgument struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
}

// promptDescriptor describes a prompt in the result of prompts/list.
type promptDescriptor struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Arguments   []promptArgument `json:"arguments"`
}

// prompts are the prompts the server offers.
var prompts = []promptDescriptor{{
	Name:        "greet",
	Description: "Greets someone.",
	Arguments:   []promptArgument{{Name: "who", Required: true}},
}}

// promptMessage is a message of the result of prompts/get, or of the params
// of sampling/createMessage.
type promptMessage struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
}

// listPrompts answers prompts/list.
func (s *server) listPrompts(c *call, params json.RawMessage) {
	start, end, ok := s.page(c, params, len(prompts))
	if !ok {
		return
	}
	c.reply(struct {
		Prompts    []promptDescriptor `json:"prompts"`
		NextCursor string             `json:"nextCursor,omitempty"`
	}{prompts[start:end], nextCursor(end, len(prompts))})
}

// getPrompt answers prompts/get.
func (s *server) getPrompt(c *call, params json.RawMessage) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	if p.Name != "greet" {
		c.fail(codeInvalidParams, fmt.Sprintf("unknown prompt %q", p.Name))
		return
	}
	who, ok := p.Arguments["who"]
	if !ok {
		c.fail(codeInvalidParams, `missing argument "who"`)
		return
	}
	text := fmt.Sprintf("Hello, %s, from %s", who, s.opts.name)
	c.reply(struct {
		Description string          `json:"description"`
		Messages    []promptMessage `json:"messages"`
	}{"greeting", []promptMessage{{Role: "user", Content: content{Type: "text", Text: text}}}})
}

// completeParams are the params of completion/complete.
type completeParams struct {
	Ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"ref"`
	Argument struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"argument"`
}

// complete answers completion/complete.
func (s *server) complete(c *call, params json.RawMessage) {
	var p completeParams
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	var choices []string
	switch {
	case p.Ref.Type == "ref/prompt" && p.Ref.Name == "greet" && p.Argument.Name == "who":
		choices = []string{"alice", "bob", "carol"}
	case p.Ref.Type == "ref/resource" && p.Ref.URI == s.resourceURI("echo/{text}") && p.Argument.Name == "text":
		choices = []string{"one", "three", "two"}
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
	type completion struct {
		Values  []string `json:"values"`
		Total   int      `json:"total"`
		HasMore bool     `json:"hasMore"`
	}
	c.reply(struct {
		Completion completion `json:"completion"`
	}{completion{Values: values, Total: len(values)}})
}

// logLevels are the logging levels of RFC 5424, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLevel answers logging/setLevel.
func (s *server) setLevel(c *call, params json.RawMessage) {
	var p struct {
		Level string `json:"level"`
	}
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	if !slices.Contains(logLevels, p.Level) {
		c.fail(codeInvalidParams, fmt.Sprintf("invalid level %q", p.Level))
		return
	}
	s.mu.Lock()
	s.logLevel = p.Level
	s.mu.Unlock()
	s.record(event{Event: "setLevel", Level: p.Level})
	c.reply(struct{}{})
}
