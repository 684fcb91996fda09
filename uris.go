package main

// Resource URIs inside results. corral renames a server's resource URIs
// (a prefix, or a qualifier after a collision: see buildCatalog), so a URI
// the server puts in a result (resources/read contents, a resource_link or
// an embedded resource in a tool's result or a prompt's messages) is not
// always one a client can read back through corral. clientURIs rewrites
// each such URI to the one that routes back to the same server and the
// same resource, and leaves every other byte of the result as it came.

import (
	"bytes"
	"encoding/json"
)

// uriMember is what a URI is called in a content block or resource
// contents; a result without it holds no URI to rewrite.
var uriMember = []byte(`"uri"`)

// clientURIs returns result, a server's result from b, with each resource
// URI in it that clients know by another name replaced by that name: the
// uri of resources/read's contents, of resource_link content blocks and of
// embedded resources, in a tool's content (tools/call, tasks/result) and in
// a prompt's messages. Only those values change: the rest of the result is
// passed on as the bytes the server sent, and a result without a "uri"
// member is not decoded at all. A URI that no name of corral's reaches is
// left as it is. The names are those of the catalog in force and the
// backends in force, which current and backends return; they are asked
// only if result has a "uri" member. It is safe for concurrent use.
func clientURIs(current func() *catalog, backends func() []*backend, b *backend, result json.RawMessage) json.RawMessage {
	if !bytes.Contains(result, uriMember) {
		return result
	}
	cat := current()
	bs := backends()
	rw := uriRewriter{rawEditor{data: result}, func(uri string) string { return cat.clientURI(bs, b, uri) }}
	rw.result()
	return rw.output()
}

// clientURI returns the URI clients use for b's resource uri: one that
// catalog c routes back to b's uri (see resolveURI). It tries, in order,
// the name the catalog lists it under, uri itself, and uri qualified by b's
// prefix or by b's name; if none routes back to it, it returns uri.
func (c *catalog) clientURI(backends []*backend, b *backend, uri string) string {
	var tries []string
	if name, ok := c.resourceNames[subKey{b.name, uri}]; ok {
		tries = append(tries, name)
	}
	tries = append(tries, uri)
	if b.cfg.Prefix != "" {
		tries = append(tries, qualify(kindResource, b.cfg.Prefix, uri))
	}
	tries = append(tries, qualify(kindResource, b.name, uri))
	for _, t := range tries {
		if rb, orig := c.resolveURI(nil, backends, t); rb == b && orig == uri {
			return t
		}
	}
	return uri
}

// uriRewriter finds the URIs in a result and collects the edits that
// rename them; output applies them. A value it does not rename is never
// decoded.
type uriRewriter struct {
	rawEditor
	rename func(string) string
}

// result looks in the members of a result that hold resources: contents
// (resources/read), content (a tool's result) and messages (a prompt's).
func (rw *uriRewriter) result() {
	rw.object(skipSpace(rw.data, 0), func(key string, vs, _ int) {
		switch key {
		case "contents":
			rw.array(vs, rw.uriOf)
		case "content":
			rw.blocks(vs)
		case "messages":
			rw.array(vs, func(ms int) {
				rw.object(ms, func(key string, cs, _ int) {
					if key == "content" {
						rw.blocks(cs)
					}
				})
			})
		}
	})
}

// blocks renames the URIs of the content block at i, or of each block of
// the array at i: a resource_link's uri, and an embedded resource's.
func (rw *uriRewriter) blocks(i int) {
	block := func(bs int) {
		rw.object(bs, func(key string, vs, _ int) {
			switch key {
			case "uri":
				rw.uri(vs)
			case "resource":
				rw.uriOf(vs)
			}
		})
	}
	if i < len(rw.data) && rw.data[i] == '[' {
		rw.array(i, block)
	} else {
		block(i)
	}
}

// uriOf renames the uri member of the object at i.
func (rw *uriRewriter) uriOf(i int) {
	rw.object(i, func(key string, vs, _ int) {
		if key == "uri" {
			rw.uri(vs)
		}
	})
}

// uri renames the string at i, if clients know it by another name.
func (rw *uriRewriter) uri(i int) {
	if i >= len(rw.data) || rw.data[i] != '"' {
		return
	}
	end := skipString(rw.data, i)
	var uri string
	if json.Unmarshal(rw.data[i:end], &uri) != nil {
		return
	}
	if name := rw.rename(uri); name != uri {
		rw.replace(i, end, name)
	}
}

// MCP Apps (io.modelcontextprotocol/ui) link a tool to the ui:// resource
// a host renders for it, in the tool's _meta.ui.resourceUri (or, in the
// extension's first drafts, _meta["ui/resourceUri"]). corral renames that
// URI as it renames the resource (see qualify), so that the host reads it
// back through corral from the same server.
var uiRefMember = []byte(`resourceUri`)

// rewriteUIRefs sets the resourceUri of each tool in c that has one to the
// URI clients read the resource by (clientURI), computed from the URI in
// the tool's object as its server sent it, so that a rebuild that reuses
// an object rewritten before gets the same bytes. It changes c, which must
// not be in force yet.
func (c *catalog) rewriteUIRefs(backends []*backend) {
	l := &c.lists[kindTool]
	for i := range l.items {
		it := &l.items[i]
		if !bytes.Contains(it.src, uiRefMember) {
			continue
		}
		nested, flat := toolUIRefs(it.src)
		if nested == "" && flat == "" {
			continue
		}
		it.raw = setToolUIRefs(it.raw, c.clientURIOrEmpty(backends, it.backend, nested), c.clientURIOrEmpty(backends, it.backend, flat))
	}
}

// clientURIOrEmpty is clientURI, and "" for "".
func (c *catalog) clientURIOrEmpty(backends []*backend, b *backend, uri string) string {
	if uri == "" {
		return ""
	}
	return c.clientURI(backends, b, uri)
}

// toolUIRefs returns the URIs a tool's object names in _meta.ui.resourceUri
// and _meta["ui/resourceUri"], each "" if it has none.
func toolUIRefs(tool json.RawMessage) (nested, flat string) {
	var t struct {
		Meta struct {
			UI struct {
				ResourceURI string `json:"resourceUri"`
			} `json:"ui"`
			Flat string `json:"ui/resourceUri"`
		} `json:"_meta"`
	}
	json.Unmarshal(tool, &t)
	return t.Meta.UI.ResourceURI, t.Meta.Flat
}

// setToolUIRefs returns tool with the URIs toolUIRefs reads set to nested
// and flat, each where it is not "".
func setToolUIRefs(tool json.RawMessage, nested, flat string) json.RawMessage {
	var fields, meta, ui map[string]json.RawMessage
	if json.Unmarshal(tool, &fields) != nil || json.Unmarshal(fields["_meta"], &meta) != nil || meta == nil {
		return tool
	}
	if nested != "" && json.Unmarshal(meta["ui"], &ui) == nil && ui != nil {
		ui["resourceUri"], _ = json.Marshal(nested)
		meta["ui"], _ = json.Marshal(ui)
	}
	if flat != "" {
		meta["ui/resourceUri"], _ = json.Marshal(flat)
	}
	fields["_meta"], _ = json.Marshal(meta)
	out, _ := json.Marshal(fields)
	return out
}
