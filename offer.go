package main

// What the gateway offers clients, gathered from its servers: the
// capabilities and instructions of its handshake, the pages of its lists,
// and the catalog's items by name or URI. Each waits, where it must, for
// servers still in their first start, so that a client that connects early
// sees everything.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// instructions returns what the servers tell clients in their handshakes:
// one server's text as it is, several under a heading naming each.
func (g *Gateway) instructions() string {
	type entry struct{ name, text string }
	var all []entry
	for _, b := range g.backendList() {
		if text := b.instructionsText(); text != "" {
			all = append(all, entry{b.name, text})
		}
	}
	if len(all) == 1 {
		return all[0].text
	}
	var out strings.Builder
	for i, e := range all {
		if i > 0 {
			out.WriteString("\n\n")
		}
		fmt.Fprintf(&out, "## Server %q\n\n%s", e.name, e.text)
	}
	return out.String()
}

// capabilities returns what the gateway offers clients: what any of its
// servers offers. Every list may change, as servers come and go.
func (g *Gateway) capabilities() map[string]any {
	caps := map[string]any{}
	listChanged := map[string]bool{"listChanged": true}
	for _, b := range g.backendList() {
		c := b.capabilities()
		if c.has(kindTool) {
			caps["tools"] = listChanged
		}
		if c.has(kindPrompt) {
			caps["prompts"] = listChanged
		}
		if c.has(kindResource) {
			r, _ := caps["resources"].(map[string]bool)
			if r == nil {
				r = map[string]bool{"listChanged": true}
				caps["resources"] = r
			}
			r["subscribe"] = r["subscribe"] || c.flag("resources", "subscribe")
		}
		for _, name := range []string{"completions", "logging"} {
			if c[name] != nil {
				caps[name] = struct{}{}
			}
		}
		if c["tasks"] != nil {
			mergeTasks(caps, c["tasks"])
		}
	}
	return caps
}

// list answers a list request of kind k with a page of the aggregated
// catalog as view v sees it, with meta as its _meta if not nil (see catalog.page). It waits,
// until ctx ends, for backends still in their first start, so that a
// client that connects early sees everything.
func (g *Gateway) list(ctx context.Context, v *view, k kind, params, meta json.RawMessage) (json.RawMessage, error) {
	g.waitFirstStarts(ctx)
	cat := g.currentCatalog()
	size := g.pageSize
	if size <= 0 {
		size = defaultPageSize
	}
	return cat.page(v, k, params, size, meta)
}

// waitFirstStarts waits until every backend's first start has succeeded or
// failed, or ctx ends.
func (g *Gateway) waitFirstStarts(ctx context.Context) {
	for _, b := range g.backendList() {
		select {
		case <-b.firstDone:
		case <-ctx.Done():
			return
		}
	}
}

// lookup finds an item by the name clients use. A name not in the catalog
// may belong to a backend still in its first start: then it waits for the
// first starts, until ctx ends, and looks again.
func (g *Gateway) lookup(ctx context.Context, k kind, name string) *catalogItem {
	if it := g.currentCatalog().lookup(k, name); it != nil {
		return it
	}
	g.waitFirstStarts(ctx)
	return g.currentCatalog().lookup(k, name)
}

// resolveURI finds the backend that serves a resource URI, and the server's
// own URI for it, after waiting for first starts if it must; see
// catalog.resolveURI.
func (g *Gateway) resolveURI(ctx context.Context, uri string) (*backend, string) {
	if b, orig := g.currentCatalog().resolveURI(g.backendList(), uri); b != nil {
		return b, orig
	}
	g.waitFirstStarts(ctx)
	return g.currentCatalog().resolveURI(g.backendList(), uri)
}

// unknown says an item is unknown and, since it may belong to a server that
// never listed its items, which servers are not ready.
func (g *Gateway) unknown(k kind, name string) string {
	what := strings.TrimSuffix(kinds[k].field, "s")
	if k == kindTemplate {
		what = "resource"
	}
	msg := fmt.Sprintf("unknown %s %q; %s names the %ss there are", what, name, kinds[k].list, what)
	for _, b := range g.backendList() {
		h := b.health()
		if h.State != stateReady && len(b.items(k)) == 0 {
			msg += fmt.Sprintf(`; server %q, whose %ss are not known, is %s: %s`, b.name, what, h.State, h.Error)
		}
	}
	return msg
}
