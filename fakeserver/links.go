//go:build linux || darwin

package main

import "encoding/json"

// linkBlock is a content block of a tool's result that names a resource: a
// resource_link (URI set) or an embedded resource (Resource set).
type linkBlock struct {
	Type     string            `json:"type"`
	URI      string            `json:"uri,omitempty"`
	Name     string            `json:"name,omitempty"`
	MimeType string            `json:"mimeType,omitempty"`
	Resource *resourceContents `json:"resource,omitempty"`
}

// links answers with the server's resources as a tool result carries them:
// a resource_link to fake://NAME/hello, the resource fake://NAME/counter
// embedded, and a resource_link to a URI no list names but the template
// fake://NAME/echo/{text} matches.
func (s *server) links(c *call, _ json.RawMessage) {
	counter, _ := s.resourceText(s.resourceURI("counter"))
	c.reply(struct {
		Content []linkBlock `json:"content"`
	}{[]linkBlock{
		{Type: "resource_link", URI: s.resourceURI("hello"), Name: "hello", MimeType: "text/plain"},
		{Type: "resource", Resource: &resourceContents{URI: s.resourceURI("counter"), MimeType: "text/plain", Text: counter}},
		{Type: "resource_link", URI: s.resourceURI("echo/linked"), Name: "linked"},
	}})
}
