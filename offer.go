package main

// What the gateway offers clients, gathered from its servers: the
// capabilities and instructions of its handshake, the pages of its lists,
// the catalog's items by name or URI, and so the server a request that
// names one goes to (offer.routeTo), within the view of who asks. Each
// waits, where it must, for servers still in their first start, so that a
// client that connects early sees everything.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// offer is what the gateway offers clients, read from the catalog and the
// backends in force through the functions it is given: it holds no state
// of its own but pageSize, set before the gateway starts, and its methods
// are safe for concurrent use.
type offer struct {
	catalog  func() *catalog   // the catalog in force (Gateway.currentCatalog)
	backends func() []*backend // the backends in force (Gateway.backendList)
	// pageSize is the number of tools in one page of tools/list. If zero,
	// defaultPageSize.
	pageSize int
}

// instructions returns what the servers view v sees tell clients in their
// handshakes: one server's text as it is, several under a heading naming
// each.
func (o *offer) instructions(v *view) string {
	type entry struct{ name, text string }
	var all []entry
	for _, b := range o.backends() {
		if text := b.instructionsText(); text != "" && v.seesServer(b.name) {
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

// capabilities returns what the gateway offers clients of view v: what any
// of the servers v sees offers, and resources and logging always, for
// corral's own (ownstatus.go). Every list may change, as servers come and
// go.
func (o *offer) capabilities(v *view) map[string]any {
	caps := map[string]any{"resources": map[string]bool{"listChanged": true}, "logging": struct{}{}}
	listChanged := map[string]bool{"listChanged": true}
	for _, b := range o.backends() {
		if !v.seesServer(b.name) {
			continue
		}
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
		mergeExtensions(caps, c["extensions"])
	}
	return caps
}

// mergeExtensions adds to caps the extensions a server declares in its
// capabilities (SEP-2133's "extensions": identifier -> settings): each
// extension any server offers is offered, with the settings of the first
// server, by name, that declares it; a later server's other settings for
// it are not merged in (the specification defines no merge of settings).
func mergeExtensions(caps map[string]any, declared json.RawMessage) {
	var ext map[string]json.RawMessage
	if json.Unmarshal(declared, &ext) != nil || len(ext) == 0 {
		return
	}
	all, _ := caps["extensions"].(map[string]json.RawMessage)
	if all == nil {
		all = map[string]json.RawMessage{}
		caps["extensions"] = all
	}
	for id, settings := range ext {
		if _, ok := all[id]; !ok && id != "" {
			all[id] = settings
		}
	}
}

// list answers a list request of kind k with a page of the aggregated
// catalog as view v sees it, with meta as its _meta if not nil (see catalog.page). It waits,
// until ctx ends, for backends still in their first start, so that a
// client that connects early sees everything.
func (o *offer) list(ctx context.Context, v *view, k kind, params, meta json.RawMessage) (json.RawMessage, error) {
	o.waitFirstStarts(ctx)
	cat := o.catalog()
	size := o.pageSize
	if size <= 0 {
		size = defaultPageSize
	}
	return cat.page(v, k, params, size, meta)
}

// waitFirstStarts waits until every backend's first start has succeeded or
// failed, or ctx ends.
func (o *offer) waitFirstStarts(ctx context.Context) {
	for _, b := range o.backends() {
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
func (o *offer) lookup(ctx context.Context, k kind, name string) *catalogItem {
	if it := o.catalog().lookup(k, name); it != nil {
		return it
	}
	o.waitFirstStarts(ctx)
	return o.catalog().lookup(k, name)
}

// listTTL returns the ttlMs of the list of kind k that view v sees: the
// smallest of the servers v sees that offer k, each server's being the
// smallest of its list's pages; 0 if one of them is not ready (its list
// may change as it starts) or speaks the legacy era, whose lists carry
// none ("If ttlMs is absent, clients SHOULD assume a default of 0").
func (o *offer) listTTL(v *view, k kind) int64 {
	ttl := int64(-1)
	for _, b := range o.backends() {
		if !v.seesServer(b.name) || !b.capabilities().has(k) {
			continue
		}
		t := b.listTTL(k)
		if b.snapshot() != stateReady {
			t = 0
		}
		if ttl < 0 || t < ttl {
			ttl = t
		}
	}
	return max(ttl, 0)
}

// paramHeaders returns the x-mcp-header annotations of the tool clients
// call name, as view v lists it (a view that changed a tool's inputSchema
// would read them again from the object it shows, with toolParamHeaders), or
// nil if v sees no such tool: its call gets the unknown tool's error,
// whatever its headers. It waits for first starts as lookup does.
func (o *offer) paramHeaders(ctx context.Context, v *view, name string) []paramHeader {
	if o.lookup(ctx, kindTool, name) == nil {
		return nil
	}
	cat := o.catalog()
	if cat.lists[kindTool].headers[name] == nil || !cat.inView(v, kindTool, name) {
		return nil
	}
	return cat.lists[kindTool].headers[name]
}

// resolveURI finds the backend that serves a resource URI within view v,
// and the server's own URI for it, after waiting for first starts if it
// must; see catalog.resolveURI.
func (o *offer) resolveURI(ctx context.Context, v *view, uri string) (*backend, string) {
	if b, orig := o.catalog().resolveURI(v, o.backends(), uri); b != nil {
		return b, orig
	}
	o.waitFirstStarts(ctx)
	return o.catalog().resolveURI(v, o.backends(), uri)
}

// unknown says an item is unknown to view v and, since it may belong to a
// server that never listed its items and is not ready, why that server is
// down, in one short line (health.downLine): the server whose prefix the
// name has, or the one such server; when there are several, each one's
// name and state only. Of a server outside v it says nothing.
func (o *offer) unknown(v *view, k kind, name string) string {
	what := strings.TrimSuffix(kinds[k].field, "s")
	if k == kindTemplate {
		what = "resource"
	}
	var backends []*backend
	for _, b := range o.backends() {
		if v.seesServer(b.name) {
			backends = append(backends, b)
		}
	}
	if p := namespace(backends, k, name); p != "" {
		for _, b := range backends {
			if b.cfg.Prefix == p && len(b.items(k)) == 0 {
				if h := b.health(); h.State != stateReady && h.State != stateIdle {
					return fmt.Sprintf("%s %q is unknown: %s", what, name, h.downLine(time.Now()))
				}
			}
		}
	}
	msg := fmt.Sprintf("unknown %s %q; %s names the %ss there are", what, name, kinds[k].list, what)
	var down []health
	for _, b := range backends {
		if h := b.health(); h.State != stateReady && h.State != stateIdle && len(b.items(k)) == 0 {
			down = append(down, h)
		}
	}
	switch len(down) {
	case 0:
	case 1:
		msg += fmt.Sprintf("; a server whose %ss are not known is down: %s", what, down[0].downLine(time.Now()))
	default:
		var names []string
		for _, h := range down {
			names = append(names, fmt.Sprintf("%q (%s)", h.Name, h.State))
		}
		msg += fmt.Sprintf("; these servers, whose %ss are not known, are down: %s; see the resource %s", what, strings.Join(names, ", "), statusURI)
	}
	return msg
}

// discover returns the result of server/discover: the versions corral
// speaks, its capabilities and its instructions, once every server's first
// start has ended (or ctx has).
func (o *offer) discover(ctx context.Context, v *view) map[string]any {
	o.waitFirstStarts(ctx)
	caps := o.capabilities(v)
	// A 2026-07-28 client has the tasks extension instead of the tasks
	// capability (tasksmodern.go): offered when a server it sees makes
	// tasks of tools/call, in either era.
	tasks, _ := caps["tasks"].(map[string]any)
	offered := tasks != nil && tasks["requests"] != nil
	delete(caps, "tasks")
	for _, b := range o.backends() {
		offered = offered || v.seesServer(b.name) && offersTasksExtension(b.capabilities())
	}
	if offered {
		caps["extensions"] = map[string]any{tasksExtension: struct{}{}}
	}
	res := map[string]any{
		"supportedVersions": allVersions(),
		"capabilities":      caps,
		"_meta":             serverInfoMeta(),
	}
	if in := o.instructions(v); in != "" {
		res["instructions"] = in
	}
	return res
}

// routeByName routes a request whose params name an item of kind k: to the
// server that offers it, with the server's own name for it in the params.
func (o *offer) routeByName(ctx context.Context, v *view, msg *wireMsg, k kind, name string) (*backend, json.RawMessage, *wireError) {
	it, werr := o.itemByName(ctx, v, msg.Method, k, name)
	if werr != nil {
		return nil, nil, werr
	}
	params := msg.Params
	if it.fixed != nil && msg.Method == "tools/call" {
		if params, werr = withFixedArguments(params, name, it.fixed); werr != nil {
			return nil, nil, werr
		}
	}
	if it.orig != name {
		params = setMember(params, routeName, it.orig)
	}
	return it.backend, params, nil
}

// routeByURI routes a request whose params hold a resource URI: to the
// server that serves it, with the server's own URI in the params.
func (o *offer) routeByURI(ctx context.Context, v *view, msg *wireMsg, uri string) (*backend, json.RawMessage, *wireError) {
	b, orig, werr := o.itemByURI(ctx, v, msg.Method, uri)
	if werr != nil {
		return nil, nil, werr
	}
	params := msg.Params
	if orig != uri {
		params = setMember(params, routeURI, orig)
	}
	return b, params, nil
}

// routeByRef routes a completion by its ref, a prompt's name or a resource
// (template) URI: to the server that offers it, with the server's own name
// or URI in the ref.
func (o *offer) routeByRef(ctx context.Context, v *view, msg *wireMsg, refType, refName, refURI string) (*backend, json.RawMessage, *wireError) {
	var fields map[string]json.RawMessage
	json.Unmarshal(msg.Params, &fields)
	var ref map[string]json.RawMessage
	json.Unmarshal(fields[routeRef], &ref)
	var b *backend
	var werr *wireError
	switch refType {
	case "ref/prompt":
		var it *catalogItem
		if it, werr = o.itemByName(ctx, v, msg.Method, kindPrompt, refName); werr == nil {
			b = it.backend
			ref[routeName], _ = json.Marshal(it.orig)
		}
	case "ref/resource":
		var orig string
		if it := o.lookup(ctx, kindTemplate, refURI); it != nil && o.catalog().inView(v, kindTemplate, refURI) {
			b, orig = it.backend, it.orig
		} else {
			b, orig, werr = o.itemByURI(ctx, v, msg.Method, refURI)
		}
		if werr == nil {
			ref[routeURI], _ = json.Marshal(orig)
		}
	default:
		werr = &wireError{Code: codeInvalidParams, Message: fmt.Sprintf(`completion/complete: unknown ref type %q; want "ref/prompt" or "ref/resource"`, refType)}
	}
	if werr != nil {
		return nil, nil, werr
	}
	fields[routeRef], _ = json.Marshal(ref)
	params, _ := json.Marshal(fields)
	return b, params, nil
}

// itemByName returns the item of kind k clients call name: its server,
// the server's own name for it, and the arguments corral fixes, if any;
// or the error to answer method with. An item outside view v is unknown,
// and its error's refusedBy names its server for the audit trail.
func (o *offer) itemByName(ctx context.Context, v *view, method string, k kind, name string) (*catalogItem, *wireError) {
	if name == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: method + ": params must name the " + strings.TrimSuffix(kinds[k].field, "s")}
	}
	it := o.lookup(ctx, k, name)
	if it == nil || !o.catalog().inView(v, k, name) {
		werr := &wireError{Code: codeInvalidParams, Message: o.unknown(v, k, name)}
		if it != nil {
			werr.refusedBy = it.backend.name // for the audit trail; the client's answer is the unknown one
		}
		return nil, werr
	}
	return it, nil
}

// itemByURI returns the server that serves the resource URI uri, and the
// server's own URI for it, or the error to answer method with. A URI of a
// server's that view v does not see is not found (refusedBy names the
// server, as in itemByName).
func (o *offer) itemByURI(ctx context.Context, v *view, method string, uri string) (*backend, string, *wireError) {
	if uri == "" {
		return nil, "", &wireError{Code: codeInvalidParams, Message: method + ": params must hold a uri"}
	}
	b, orig := o.resolveURI(ctx, v, uri)
	if b == nil {
		werr := &wireError{Code: codeResourceNotFound, Message: o.unknown(v, kindResource, uri) + ", and no resource template matches it"}
		if v != nil {
			if hidden, _ := o.resolveURI(ctx, nil, uri); hidden != nil {
				werr.refusedBy = hidden.name // as in itemByName
			}
		}
		return nil, "", werr
	}
	return b, orig, nil
}

// routeTo is route with the params decoded: name, uri, and a completion's
// ref. The method's routing member (see methods) says which of them routes
// it.
func (o *offer) routeTo(ctx context.Context, v *view, msg *wireMsg, name, uri, refType, refName, refURI string) (*backend, json.RawMessage, *wireError) {
	info := methods[msg.Method]
	var b *backend
	var params json.RawMessage
	var werr *wireError
	switch info.member {
	case routeName:
		b, params, werr = o.routeByName(ctx, v, msg, info.kind, name)
	case routeURI:
		b, params, werr = o.routeByURI(ctx, v, msg, uri)
	default:
		b, params, werr = o.routeByRef(ctx, v, msg, refType, refName, refURI)
	}
	if werr != nil {
		return nil, nil, werr
	}
	if info.capability != "" && b.capabilities()[info.capability] == nil {
		return nil, nil, &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("server %q does not offer %s", b.name, info.capability)}
	}
	return b, params, nil
}
